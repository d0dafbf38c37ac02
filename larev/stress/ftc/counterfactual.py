"""Rule-based transform: from a relation R(A, B) and the hypothesis x to the counterfactual hypothesis x_cf.

Paper section 2.2 (table 2, propositions 1-3) and the examples of table 3 / appendix table 14:

  E, C   the span of x that is A (or B) is replaced by the other span: x[B\\A]; y_cf = entailment. A <=> B is
         symmetric, and the C examples of table 14 replace whichever of the two spans the hypothesis holds, so
         both directions are tried. When x holds both spans the explanation restates x rather than relating
         premise (A) and hypothesis (B) as section 2.1 has it, and no counterfactual is built.
  N[A]   B, which x states and the premise does not imply, is replaced by A; y_cf = entailment.
  N[B]   x keeps B only; y_cf = neutral.
         For both N cases x is cut after B, as in every N example of tables 3 and 14 ('People are shopping in
         the city.' -> 'People are walking down a city sidewalk.' / 'People are shopping.'): what follows B is
         further unsupported detail that would keep x_cf[A] neutral.

Finding a span in x (`locate`) is word-based and tolerant: case, crude stems (section 2.4 allows stemmed
replacement), determiners and forms of be/have/do are ignored; when the whole span is not found, its subject
('he has a broom' -> 'has a broom') and then its auxiliaries ('must be giving ...' -> 'giving ...') are
dropped; last, a window of x that starts and ends with the span's first and last content words, has about the
span's length and shares most of its words matches too ('chatting to your friend' ~ 'chatting with her best
friend'). The inserted span is fitted to its slot (`fit`): its subject is dropped unless the slot
holds x's subject, its auxiliaries are dropped after an auxiliary of x, the word before the slot (an article,
a preposition) is not doubled, 'a'/'an' agree, a verb after a dropped auxiliary takes the -ing form when the
word it replaces has it, and x's capital letter is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from larev.stress.ftc.relations import (REASON_B_NOT_IN_HYPOTHESIS, REASON_BOTH_IN_HYPOTHESIS, REASON_DOES_NOT_FIT,
                                 REASON_NO_A_SPAN, REASON_SAME_SPANS, REASON_SPAN_NOT_IN_HYPOTHESIS, REASON_UNCHANGED,
                                 Case, Counterfactual, Extraction, FtcAttempt, Relation, Y_CF, cases_for,
                                 failed_attempts)
from larev.stress.ftc.text import (AUX, BE, DETERMINERS, VERB_MARKERS, Token, aux_length, ing_form, is_content,
                                   is_participle, looks_like_base_verb, match_key, subject_length, tokens)

MAX_FUZZY_EXTRA_WORDS = 3


@dataclass(frozen=True)
class SpanMatch:
    """Where a span was found in x: [start, end) characters, and how much of the span had to be dropped."""

    start: int
    end: int
    with_subject: bool = False  # the matched words include the span's subject ('the girl is standing')
    dropped_aux: bool = False
    fuzzy: bool = False


def _content_keys(words: list[Token]) -> list[tuple[int, str]]:
    """(index, match key) of the words that are not determiners."""
    return [(i, match_key(w.text)) for i, w in enumerate(words) if w.lower not in DETERMINERS]


def _find_exact(span_words: list[Token], x_words: list[Token]) -> tuple[int, int] | None:
    """First run of x words equal (by match key, determiners skipped) to the span's words: (first, last) index."""
    want = [k for _, k in _content_keys(span_words)]
    have = _content_keys(x_words)
    n = len(want)
    if n == 0:
        return None
    for s in range(len(have) - n + 1):
        if all(have[s + j][1] == want[j] for j in range(n)):
            return have[s][0], have[s + n - 1][0]
    return None


def _find_fuzzy(span_words: list[Token], x_words: list[Token]) -> tuple[int, int] | None:
    """Shortest x window that starts and ends with the span's first and last content words, is at most
    MAX_FUZZY_EXTRA_WORDS words longer and at most two words shorter than the span (determiners aside), and
    holds at least 60% of the span's words."""
    keyed = _content_keys(span_words)
    content = [k for i, k in keyed if is_content(span_words[i].text)]
    if len(content) < 2:
        return None
    n = len(keyed)
    have = _content_keys(x_words)
    best: tuple[int, int] | None = None
    for a, (ia, ka) in enumerate(have):
        if ka != content[0]:
            continue
        for b in range(a + max(1, n - 3), min(len(have), a + n + MAX_FUZZY_EXTRA_WORDS)):
            if have[b][1] != content[-1]:
                continue
            window = {k for _, k in have[a:b + 1]}
            if sum(k in window for _, k in keyed) >= 0.6 * n and (best is None or have[b][0] - ia < best[1] - best[0]):
                best = (ia, have[b][0])
            break
    return best


def locate(span: str, hypothesis: str) -> SpanMatch | None:
    """Where `span` occurs in `hypothesis` (see the module docstring for the tolerance), or None."""
    x_words = tokens(hypothesis)
    words = tokens(span)
    k = subject_length(words)
    j = aux_length(words[k:])
    variants: list[tuple[list[Token], bool, bool]] = [(words, k > 0, False)]
    if k:
        variants.append((words[k:], False, False))
    if j:
        variants.append((words[k + j:], False, True))
    variants = [v for v in variants if any(is_content(w.text) for w in v[0])]
    for finder, fuzzy in ((_find_exact, False), (_find_fuzzy, True)):
        for vwords, with_subject, dropped_aux in variants:
            found = finder(vwords, x_words)
            if found is None:
                continue
            first, last = found
            if (with_subject and vwords[0].lower in DETERMINERS and first > 0
                    and x_words[first - 1].lower in DETERMINERS):
                first -= 1  # a whole clause 'the crowd is ...' takes x's own article with it
            return SpanMatch(x_words[first].start, x_words[last].end, with_subject, dropped_aux, fuzzy)
    return None


def _word_before(hypothesis: str, start: int) -> Token | None:
    before = [t for t in tokens(hypothesis[:start]) if t.end <= start]
    return before[-1] if before else None


_FINITE = AUX - {"to", "also", "both", "either", "simultaneously", "probably", "likely", "definitely", "certainly",
                 "still", "just", "now"}


def fit(replacement: str, hypothesis: str, match: SpanMatch) -> tuple[int, str] | None:
    """The replacement span shaped to fill x's slot at `match` (see the module docstring): (where the slot
    starts, the text), or None when it cannot fit (a verb phrase or preposition right after an article)."""
    words = tokens(replacement)
    if not words:
        return None
    start = match.start
    slot = [t for t in tokens(hypothesis) if match.start <= t.start < match.end]
    before = _word_before(hypothesis, start)
    k = subject_length(words)
    verb_led = words[0].lower in VERB_MARKERS
    if match.with_subject:
        xs = subject_length(slot)
        if k == 0 and xs:  # a predicate replaces a clause: x keeps its own subject
            start, before, slot = slot[xs].start, slot[xs - 1], slot[xs:]
    elif before is not None and k:
        words, verb_led = words[k:], True  # the word after a subject is its verb
    if before is not None and not verb_led:
        # x's own auxiliaries stay when the replacement brings no verb ('are writing' -> 'are playing')
        n_aux = 0
        while n_aux < len(slot) - 1 and slot[n_aux].lower in _FINITE:
            n_aux += 1
        if n_aux:
            start, before, slot = slot[n_aux].start, slot[n_aux - 1], slot[n_aux:]
    stripped_aux = False
    if before is not None:
        if before.lower in AUX or before.lower == "not":
            j = aux_length(words)
            words, stripped_aux = words[j:], j > 0
        if len(words) > 1 and (words[0].lower == before.lower
                               or (before.lower in DETERMINERS and words[0].lower in DETERMINERS)):
            words = words[1:]  # no 'at at', no 'the a'
        if before.lower in DETERMINERS and (words[0].lower in AUX | VERB_MARKERS or not is_content(words[0].text)):
            return None
    text = replacement[words[0].start:].strip().rstrip(" ,.;:!?\"'")
    first = words[0].text
    if (stripped_aux and before is not None and before.lower in BE and slot and is_participle(slot[0].text)
            and looks_like_base_verb(first)):
        text = ing_form(first) + text[len(first):]  # 'is shopping' <- 'can walk ...': 'is walking ...'
    return start, text


def _agree_article(prefix: str, text: str) -> str:
    """`prefix` with a final 'a'/'an' made to agree with the first letter of `text`."""
    m = re.search(r"\b(a|an|A|An)(\s+)$", prefix)
    if not m or not text:
        return prefix
    article = "an" if text[0].lower() in "aeiou" else "a"
    if m.group(1)[0].isupper():
        article = article.capitalize()
    return prefix[:m.start()] + article + m.group(2)


def _join(prefix: str, text: str, suffix: str, hypothesis: str) -> str:
    """prefix + text + suffix, with article agreement and x's sentence-initial capital kept."""
    prefix = _agree_article(prefix, text)
    if not prefix.strip() and hypothesis[:1].isupper():
        text = text[:1].upper() + text[1:]
    return prefix + text + suffix


def _end_punctuation(hypothesis: str) -> str:
    """x's final sentence mark with the spacing it had (' .' in e-SNLI), or ''."""
    m = re.search(r"(\s*[.!?])\s*$", hypothesis)
    return m.group(1) if m else ""


def _same(a: str, b: str) -> bool:
    keys = lambda s: [k for _, k in _content_keys(tokens(s))]  # noqa: E731
    return keys(a) == keys(b)


def substitute(relation: Relation, hypothesis: str, case: Case) -> Counterfactual | str:
    """The counterfactual of one case from one relation, or the reason it cannot be built."""
    backend = relation.backend
    if relation.a is not None and _same(relation.a, relation.b):
        return REASON_SAME_SPANS
    if case in ("E", "C"):
        assert relation.a is not None
        found = [(m, other, which) for span, other, which in ((relation.b, relation.a, "b"),
                                                              (relation.a, relation.b, "a"))
                 if (m := locate(span, hypothesis)) is not None]
        if not found:
            return REASON_SPAN_NOT_IN_HYPOTHESIS
        if len(found) == 2:  # the explanation restates x instead of linking premise and hypothesis (2.1)
            return REASON_BOTH_IN_HYPOTHESIS
        ((match, other, _),) = found
        fitted = fit(other, hypothesis, match)
        if fitted is None:
            return REASON_DOES_NOT_FIT
        start, text = fitted
        replaced = hypothesis[start:match.end]
        if _same(text, replaced):
            return REASON_SAME_SPANS
        x_cf = _join(hypothesis[:start], text, hypothesis[match.end:], hypothesis)
        if x_cf.strip().lower() == hypothesis.strip().lower():
            return REASON_UNCHANGED
        return Counterfactual(x_cf, Y_CF[case], case, backend, replaced, text)
    match = locate(relation.b, hypothesis)
    if match is None:
        return REASON_B_NOT_IN_HYPOTHESIS
    replaced = hypothesis[match.start:match.end]
    end = _end_punctuation(hypothesis)
    if case == "N[B]":
        return Counterfactual(hypothesis[:match.end] + end, Y_CF[case], case, backend, replaced, None)
    if relation.a is None:
        return REASON_NO_A_SPAN
    fitted = fit(relation.a, hypothesis, match)
    if fitted is None:
        return REASON_DOES_NOT_FIT
    start, text = fitted
    if _same(text, hypothesis[start:match.end]):
        return REASON_SAME_SPANS
    return Counterfactual(_join(hypothesis[:start], text, end, hypothesis), Y_CF[case], case, backend,
                          hypothesis[start:match.end], text)


def build_counterfactuals(extraction: Extraction, hypothesis: str, label: str) -> list[FtcAttempt]:
    """One attempt per case of `label` (table 2). Each case uses the first candidate relation that gives it a
    counterfactual; when none does, the attempt carries the first candidate's reason."""
    if not extraction.relations:
        return failed_attempts(label, extraction.backend, extraction.reason or "no relation")
    attempts = []
    for case in cases_for(label):
        relations = extraction.relations
        if case == "N[A]":  # relations naming A first; stable, so the extractor's order holds otherwise
            relations = tuple(sorted(relations, key=lambda r: r.a is None))
        first_reason: tuple[str, Relation] | None = None
        for relation in relations:
            out = substitute(relation, hypothesis, case)
            if isinstance(out, Counterfactual):
                attempts.append(FtcAttempt(case=case, y_cf=out.y_cf, backend=out.backend, counterfactual=out,
                                           relation=relation))
                break
            if first_reason is None:
                first_reason = (out, relation)
        else:
            assert first_reason is not None
            reason, relation = first_reason
            attempts.append(FtcAttempt(case=case, y_cf=Y_CF[case], backend=relation.backend, relation=relation,
                                       reason=reason))
    return attempts
