"""The rationale-generation prompt of the thesis's appendix C.3, filled for one example.

Appendix C.3 gives one template for a question-answer pair, used for every task model of section 5.4.5 (GPT-4,
Gemini-2.5-Pro, Llama-3.1-8B-Instruct, Flan-T5-Large). An NLI example has no question: it gets the same prompt
with its premise and hypothesis in the question's place (issue 54), the rest word for word. The example's texts
are placed as they are, as in the thesis (no data delimiters: the rationales are to be comparable with its table
5.8).
"""

from __future__ import annotations

import re

# Thesis appendix C.3, verbatim (its lines are separated by blank lines there).
C3_INSTRUCTIONS = """\
Explain why the answer is correct in detail.

Assume the given answer is correct. Do not challenge or change the answer.

Please finish in one sentence."""

# Thesis appendix C.3: a question and its answer.
QA_PROMPT = "Question: {question}\n\nAnswer: {answer}\n\n" + C3_INSTRUCTIONS

# Thesis appendix C.3 for NLI: the premise and hypothesis in the question's place (issue 54).
NLI_PROMPT = "Premise: {premise}\n\nHypothesis: {hypothesis}\n\nAnswer: {answer}\n\n" + C3_INSTRUCTIONS


def rationale_prompt(task: str, *, label: str, premise: str | None = None, hypothesis: str | None = None,
                     question: str | None = None) -> str:
    """The C.3 prompt for one example: its texts and its (gold) label as the answer to explain."""
    answer = label.strip()
    if task == "nli":
        return NLI_PROMPT.format(premise=(premise or "").strip(), hypothesis=(hypothesis or "").strip(), answer=answer)
    if task == "qa":
        return QA_PROMPT.format(question=(question or "").strip(), answer=answer)
    raise ValueError(f"unknown task {task!r}; expected 'nli' or 'qa'")


def rationale_prompts(frame) -> list[str]:
    """`rationale_prompt` of every row of an examples-shaped frame (task, premise, hypothesis, question, label)."""
    return [rationale_prompt(t, label=y, premise=p, hypothesis=h, question=q)
            for t, p, h, q, y in zip(frame["task"], frame["premise"], frame["hypothesis"], frame["question"],
                                     frame["label"])]


_WRAPPING = "\"'`\u201c\u201d"


def clean_reply(reply: str | None) -> str | None:
    """A generated rationale as one line: whitespace runs become one space, one pair of wrapping quotes goes;
    None when nothing is left (an empty or blocked reply)."""
    if reply is None:
        return None
    text = re.sub(r"\s+", " ", reply).strip()
    if len(text) >= 2 and text[0] in _WRAPPING and text[-1] in _WRAPPING:
        text = text[1:-1].strip()
    return text or None
