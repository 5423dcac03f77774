"""Settings of `labeler serve` beside the reward's (labeler/rewards/config.py), each declared once."""

from __future__ import annotations

from dataclasses import dataclass

from labeler.labeling.config import check_numbers, setting

SERVER = "server"


@dataclass(frozen=True)
class ServeConfig:
    host: str = setting("127.0.0.1", help="address to bind; 0.0.0.0 serves other machines (there is no authentication)", group=SERVER)
    port: int = setting(8000, at_least=0, at_most=65535, help="port to listen on; 0 picks a free one (printed)", group=SERVER)
    max_batch: int = setting(32, at_least=1, help="completions scored together at most, from all waiting requests", group=SERVER)
    max_wait_ms: float = setting(
        5.0, at_least=0, help="how long a batch waits for more completions before it is scored", group=SERVER
    )
    max_pending: int = setting(
        1024, at_least=1, help="completions waiting at most; a request beyond them gets 503 (retry later) at once", group=SERVER
    )
    request_timeout_s: float = setting(
        120.0, above=0, help="a request not answered in this time gets 504; its completions are dropped unscored if still queued, else "
        "scored and their rewards discarded",
        group=SERVER,
    )  # fmt: skip
    unmeasured_score: float = setting(
        0.0,
        help="the reward /get_reward gives a completion whose reward could not be measured (empty, a step past the PRM's "
        "length limit, a missing label, an answer check that timed out), since OpenRLHF needs a number for every sample: "
        "the default, 0, is a failing reward no higher than any measured one; each such sample is logged with its reason, "
        "flagged in extra_logs.prm_unmeasured and counted in /health",
        group=SERVER,
    )

    def __post_init__(self):
        check_numbers(self)
