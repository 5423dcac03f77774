"""How the reward server finds the response in OpenRLHF's queries (labeler.serving.reward_server.response_of_query):
every form OpenRLHF sends gives the response back, whatever the prompt and response hold; a query built from
another prompt gives none (the server refuses it rather than guess)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.serving.reward_server import CUT_TOKEN_CHARS, PROMPT_TAIL_CHARS, response_of_query

text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="<>|"), min_size=0, max_size=300)
CHAT_END = "<|im_end|>\n<|im_start|>assistant\n"


@settings(max_examples=300, deadline=None)
@given(question=text, response=text, pads=st.integers(0, 4), cut=st.integers(0, 400))
def test_every_form_openrlhf_sends_gives_the_response_back(question, response, pads, cut):
    prompt = f"<|im_start|>user\n{question}{CHAT_END}"
    assert response_of_query(prompt + response, prompt) == response
    assert response_of_query("<|endoftext|>" * pads + prompt + response + "<|im_end|>", prompt) == response + "<|im_end|>"
    kept = max(len(prompt) - cut, min(len(prompt), PROMPT_TAIL_CHARS))  # cut from the left, never into the last tail
    assert response_of_query(prompt[-kept:] + response, prompt) == response


@settings(max_examples=200, deadline=None)
@given(response=text, cut=st.integers(0, 55))
def test_a_few_shot_prompt_whose_shots_end_alike_is_split_at_its_end(response, cut):
    ending = "Think step by step and give the answer at the end." + CHAT_END  # the same 64-character end after every shot
    questions = ["A baker has 12 loaves and sells 5 of them.", "Name a prime number above 10.", "What is 7*8?"]
    prompt = "".join(f"<|im_start|>user\n{q}\n\n{ending}" for q in questions)
    assert response_of_query(prompt[cut:] + response, prompt) == response  # cut within the first shot's question


def test_a_kept_prompt_that_repeats_itself_is_ambiguous_and_refused():
    prompt = "Q: repeat after me " + "la " * 40
    assert response_of_query(prompt[30:] + "la la la la The answer is 3.", prompt) is None  # where does the prompt end?


def test_a_query_of_another_short_question_with_the_same_end_is_refused():
    ending = " Please reason step by step, and put your final answer in a box." + CHAT_END
    asked, other = f"<|im_start|>user\nWhat is 2+3?{ending}", f"<|im_start|>user\nWhat is 7*8?{ending}"
    assert response_of_query(other + "56", asked) is None


@given(question=text, other=st.text(min_size=CUT_TOKEN_CHARS + 1, max_size=80).filter(lambda t: "<" not in t))
def test_a_query_of_another_prompt_gets_no_response(question, other):
    prompt = f"<|im_start|>user\n{question}{CHAT_END}"
    query = other + prompt[-PROMPT_TAIL_CHARS:] + "2 + 3 = 5."
    if not prompt.endswith(query[: -len("2 + 3 = 5.")][CUT_TOKEN_CHARS:]) and not query.startswith(prompt):
        assert response_of_query(query, prompt) is None
