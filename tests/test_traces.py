"""Reasoning traces as input: the layouts the trace preset reads, the thinking split rule, and how a
trace prefix is shown to the completer."""

import pytest

from labeler.inputs.presets import PresetOptions, detect_preset, resolve_preset, to_source_row
from labeler.inputs.readers import InputError
from labeler.inputs.splitting import merge_balanced, split_steps
from labeler.inputs.traces import parse_trace, render_trace, response_part
from labeler.labeling.planning import assign_row_keys
from labeler.labeling.prompts import assistant_prefix
from labeler.records import RowError

THINKING = "\n\n".join(
    [
        "Let me read the problem again.",
        "We need $2 + 2$. Write it as a display:\n\\[\n2 + 2\n\n= 4\n\\]",  # a blank line inside display math
        "Hmm, wait, is that right? Two and two.",
        "Yes, four.",
    ]
)
RESPONSE = "Adding the two numbers gives $\\boxed{4}$."


def read(row: dict, preset: str = "trace", **options):
    return to_source_row(preset, 3, row, PresetOptions(**options))


# --- the layouts -------------------------------------------------------------------------------


def test_think_tags_in_the_response_field():
    row = read({"problem": "What is 2 + 2?", "answer": "4", "response": f"<think>\n{THINKING}\n</think>\n\n{RESPONSE}"})
    assert row.steps[: row.thinking_steps] == tuple(split_steps(THINKING, "thinking"))
    assert row.thinking_steps == 4 and row.steps[-1] == RESPONSE and len(row.steps) == 5  # the response: one final step
    assert row.complete and row.source == "trace" and row.reference_answer == "4"


def test_a_template_that_opened_the_thinking_leaves_only_its_close():
    row = read({"question": "What is 2 + 2?", "answer": 4, "output": f"{THINKING}\n</think>\n{RESPONSE}"})
    assert (row.thinking_steps, row.steps[-1], row.problem) == (4, RESPONSE, "What is 2 + 2?")


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content", "thinking"])
def test_a_reasoning_field_beside_the_response(field):
    row = read({"prompt": "What is 2 + 2?", "reference_answer": "4", field: THINKING, "content": RESPONSE})
    assert row.thinking_steps == 4 and row.steps[-1] == RESPONSE and row.complete


def test_column_flags_name_the_fields():
    row = {"q": "What is 2 + 2?", "gold": "4", "why": THINKING, "said": RESPONSE}
    options = PresetOptions(problem_column="q", answer_column="gold", reasoning_column="why", solution_column="said")
    assert resolve_preset(None, row, options) == "trace"  # --reasoning-column alone picks the trace preset
    source = to_source_row("trace", 0, row, options)
    assert source.thinking_steps == 4 and source.steps[-1] == RESPONSE


def test_thinking_cut_off_before_its_response_is_an_unfinished_trace():
    row = read({"problem": "What is 2 + 2?", "answer": "4", "response": f"<think>\n{THINKING}"})
    assert row.thinking_steps == len(row.steps) == 4 and not row.complete  # its last step is rolled out, not checked
    no_content = read({"problem": "What is 2 + 2?", "answer": "4", "reasoning": THINKING, "response": None})
    assert no_content.thinking_steps == len(no_content.steps) and not no_content.complete


def test_thinking_closed_with_nothing_after_it_is_an_unfinished_trace():
    """Its last step is thinking, not a final answer: rolled out, and the trajectory `unfinished`, as in the
    reasoning-column layout."""
    row = read({"problem": "What is 2 + 2?", "answer": "4", "response": f"<think>\n{THINKING}\n</think>\n\n"})
    assert row.thinking_steps == len(row.steps) == 4 and not row.complete
    closed = read({"problem": "What is 2 + 2?", "answer": "4", "response": f"{THINKING}\n</think>"})  # the template opened it
    assert closed.thinking_steps == len(closed.steps) and not closed.complete


def test_empty_thinking_leaves_the_response_alone():
    row = read({"problem": "What is 2 + 2?", "answer": "4", "response": f"<think>\n\n</think>\n\n{RESPONSE}"})
    assert (row.steps, row.thinking_steps, row.complete) == ((RESPONSE,), 0, True)


@pytest.mark.parametrize(
    "row, field, reason",
    [
        ({"problem": "p", "answer": "4", "response": "Just an answer: 4"}, "reasoning", "no thinking: no </think> in column 'response'"),
        ({"problem": "p", "answer": "4", "reasoning": "t", "response": "<think>t</think>4"}, "reasoning", "thinking twice"),
        ({"problem": "p", "answer": "4", "response": "<think>\n</think>"}, "response", "empty thinking and no response"),
        ({"problem": "p", "answer": "4", "response": "Intro <think>t</think>4"}, "response", "text before <think>"),
        ({"problem": "p", "response": "<think>t</think>4"}, "answer", "missing column 'answer'"),
        ({"problem": "p", "answer": "<think>t</think>4"}, "answer", "holds a thinking trace"),
        ({"answer": "4", "response": "<think>t</think>4"}, "problem", "missing column 'problem'"),
        ({"problem": "p", "answer": "4", "response": ["<think>"]}, "response", "holds list, expected text"),
    ],
)
def test_bad_trace_rows_name_the_field(row, field, reason):
    with pytest.raises(RowError) as error:
        read(row)
    assert error.value.field == field and reason in error.value.reason


def test_detection_prefers_trace_over_math_and_gsm8k():
    assert detect_preset({"problem": "p", "answer": "4", "response": "<think>t</think>4"}) == "trace"
    assert detect_preset({"question": "p", "answer": "4", "reasoning_content": "t", "content": "4"}) == "trace"
    assert detect_preset({"problem": "p", "answer": "4", "solution": "no tags here"}) == "math"


def test_the_trace_preset_refuses_a_steps_column_and_others_refuse_a_reasoning_column():
    with pytest.raises(InputError, match="does not take --steps-column"):
        resolve_preset("trace", None, PresetOptions(steps_column="s"))
    with pytest.raises(InputError, match="does not take --reasoning-column"):
        resolve_preset("math", None, PresetOptions(reasoning_column="r"))


def test_a_trace_and_the_same_texts_as_plain_steps_are_two_solutions():
    trace = read({"problem": "p", "answer": "4", "response": "<think>a\n\nb</think>c"})
    plain = read({"problem": "p", "answer": "4", "steps": ["a", "b", "c"]}, preset="processbench")
    assert trace.steps == plain.steps and trace.thinking_steps == 2 and plain.thinking_steps == 0
    first, second = assign_row_keys([trace, plain])
    assert first.given_solution().solution_id != second.given_solution().solution_id
    assert first.given_solution().thinking_steps == 2


def test_parse_trace_and_response_part():
    assert parse_trace("<think>a</think>b") == parse_trace("a</think>\nb")
    assert parse_trace("plain text").thinking is None
    assert response_part("thinking \\boxed{3}</think> so \\boxed{4}") == " so \\boxed{4}"
    assert response_part("no tags \\boxed{4}") == "no tags \\boxed{4}"


# --- the thinking split rule -------------------------------------------------------------------


def test_thinking_merges_paragraphs_into_at_most_k_chunks_of_balanced_length():
    paragraphs = [f"Thought {i}:" + " so" * (i % 9) for i in range(300)]
    chunks = split_steps("\n\n".join(paragraphs), "thinking", max_steps=20)
    assert len(chunks) == 20
    assert "\n\n".join(chunks) == "\n\n".join(paragraphs)  # nothing lost, nothing reordered
    lengths = [len(chunk) for chunk in chunks]
    longest_paragraph = max(map(len, paragraphs))
    assert max(lengths) - min(lengths) <= 2 * longest_paragraph  # each cut within one paragraph of its target


def test_thinking_never_cuts_display_math_and_keeps_short_traces_whole():
    assert split_steps(THINKING, "thinking", max_steps=64) == THINKING.split("\n\n")[:1] + [
        "We need $2 + 2$. Write it as a display:\n\\[\n2 + 2\n\n= 4\n\\]",
        "Hmm, wait, is that right? Two and two.",
        "Yes, four.",
    ]
    assert split_steps(THINKING, "thinking", max_steps=1) == [THINKING]


def test_thinking_without_blank_lines_goes_by_lines():
    assert split_steps("one\ntwo\nthree\nfour", "thinking", max_steps=2) == ["one\ntwo", "three\nfour"]


def test_a_paragraph_longer_than_its_share_stays_whole():
    pieces = ["x" * 1000, "a", "b", "c"]
    assert merge_balanced(pieces, 3) == ["x" * 1000, "a\n\nb\n\nc"]  # fewer than 3: no cut inside a paragraph


def test_max_steps_reaches_the_preset():
    thinking = "\n\n".join(f"Paragraph {i}." for i in range(100))
    row = read({"problem": "p", "answer": "4", "response": f"<think>{thinking}</think>4"}, max_steps=10)
    assert row.thinking_steps == 10 and len(row.steps) == 11


# --- how the completer sees a trace prefix -------------------------------------------------------


def test_a_prefix_inside_the_thinking_leaves_it_open():
    steps = ("a", "b", "The answer is 4")
    assert assistant_prefix(steps[:1], thinking_steps=2) == "<think>\na\n\n"
    assert assistant_prefix(steps[:2], thinking_steps=2) == "<think>\na\n\nb\n\n"
    assert assistant_prefix(steps, thinking_steps=2) == "<think>\na\n\nb\n</think>\n\nThe answer is 4\n\n"
    assert assistant_prefix(steps[:2]) == "a\n\nb\n\n"  # a plain solution, as before
    assert render_trace(steps, 2) == "<think>\na\n\nb\n</think>\n\nThe answer is 4"


def test_a_chat_template_that_opens_the_thinking_is_not_given_a_second_think():
    from labeler.labeling.generation import GenerationRequest
    from workers.vllm_generator import VLLMGenerator

    class OpensThinking:  # what DeepSeek-R1's template does: the assistant turn starts inside <think>
        chat_template = "..."

        @staticmethod
        def apply_chat_template(messages, add_generation_prompt, tokenize):
            return f"<user>{messages[0]['content']}<assistant><think>\n"

    generator = VLLMGenerator.__new__(VLLMGenerator)  # no engine: only the prompt rendering
    generator.tokenizer = OpensThinking()
    trace = GenerationRequest("Q", assistant_prefix(("a", "b"), thinking_steps=2), n=1, seed=0)
    assert generator.render(trace) == "<user>Q<assistant><think>\na\n\nb\n\n"
    plain = GenerationRequest("Q", assistant_prefix(("a", "b")), n=1, seed=0)
    assert generator.render(plain) == "<user>Q<assistant><think>\na\n\nb\n\n"  # a plain prefix is left as it is
