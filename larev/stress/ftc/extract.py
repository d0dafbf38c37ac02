"""Rule-based extraction of R(A, B) from an NLI explanation: the regex baseline of section 2.4 / 3.2.

The templates follow the explanation patterns of appendix tables 15 (entailment), 16 (contradiction) and 17
(neutral), written afresh and extended with the forms that are frequent in e-SNLI. Only the templates of the
example's label are tried, since the label fixes the relation (table 2). Each template is matched against the
whole of a unit: every sentence of the explanation, then the sentence's comma-separated chunks, then its
chunks between 'and' / 'but' / 'so' / 'because' (a sentence often states two relations). Candidates come out in
template order, then unit order, so the transform (`build_counterfactuals`) can try them until one fits the
hypothesis. The generic templates ('A is B', 'A must be B', 'A is not B', 'A can't be B', 'S can't B', 'S may not
be B', 'S doesn't have to be B') are tried on a unit only when no specific template matched it, since they also
match the specific forms with the spans cut in the wrong place.

Template families (named groups: a = A, b = B, s = a subject; in neutral templates without an 'a' group, and in
'S can't B', A is what the subject adds to its head noun, see `subject_modifier`, or None):

  entailment (A <=> B)      'A is the same as B', 'A is another way of saying B', 'A and B are synonyms',
                            'A and B are the same (thing)', 'A is a type / kind / form / part of B', 'A implies /
                            means / indicates / shows B', 'if A(,) then B', 'A, so B', 'A must be B', 'A is (a) B'
  contradiction             'S can't be A and B (at the same time)', 'either A or B', 'S can't A while / if B',
  (not (A <=> B))           'impossible to A while B', 'if A, S is not B', 'A can't be B', 'A is different from /
                            the opposite of / not the same as B', 'A and B are different', 'A, not B', 'A instead
                            of B', 'A is not (a) B'
  neutral (not (A => B))    'just because A(,) doesn't mean B', 'S doesn't have to be B to A', 'A does not imply /
                            mean / indicate B', 'S can A without B', 'A for reasons other than B'; and, naming B
                            only: 'not all S are B', 'S is not necessarily B', 'S may / might not be B', 'S doesn't
                            have to be B', 'there is no evidence that B', 'we can't tell / know if B', 'it is not
                            stated that B', 'the premise doesn't say B', 'B is not mentioned'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from larev.stress.ftc.relations import (KIND_OF_LABEL, REASON_EMPTY_EXPLANATION, REASON_NO_TEMPLATE, RULES, Extraction,
                                 Relation)
from larev.stress.ftc.text import DETERMINERS, has_content, is_participle, normalise, tokens
from larev.schema import NLI_LABELS

MAX_SPAN_WORDS = 20

_BE = r"(?:is|are|was|were|am)"
_NOT_BE = r"(?:is not|isn't|are not|aren't|was not|wasn't|were not|weren't)"
_CANT = (r"(?:can't|cannot|can not|cant|couldn't|could not|would not|wouldn't|won't|will not|"
         r"(?:is|are) not able to|(?:isn't|aren't) able to)")
_NEG_DO = (r"(?:doesn't|does not|doesnt|don't|do not|dont|didn't|did not|didnt|isn't|is not|aren't|are not|"
           r"won't|will not|wouldn't|would not)")
_IMPLY = (r"(?:(?:necessarily|always|automatically|really|mean to|have to|has to) )?"
          r"(?:mean|imply|indicate|make|signify|suggest|entail|infer|guarantee|prove|show|equal|lead to)s?")
_SAME_TIME = r"(?:at the same time|simultaneously|at once|together|concurrently|in the same moment)"


@dataclass(frozen=True)
class Template:
    """One explanation pattern; matched against a whole unit (lower-cased, normalised)."""

    name: str
    label: str
    regex: re.Pattern[str]
    fallback: bool = False  # generic: tried on a unit only when no specific template of the label matched it

    @property
    def a_from_subject(self) -> bool:
        """'not all S are B', 'S is not assumed to be B': A is what the subject S adds to its head noun."""
        return "a" not in self.regex.groupindex and "s" in self.regex.groupindex


def _t(label: str, name: str, pattern: str, fallback: bool = False) -> Template:
    return Template(f"{label[0].upper()}.{name}", label, re.compile(pattern), fallback)


TEMPLATES: tuple[Template, ...] = (
    # ---- entailment: A <=> B (table 15)
    _t("entailment", "same_as",
       r"(?P<a>.+?) (?:is|are|means?) (?:just |basically |essentially |also |simply )?(?:the same(?: thing)? as|"
       r"another way (?:of saying|to say)|a way (?:of saying|to say)|an? (?:rephrasing|restatement|rewording|"
       r"paraphrase|synonym|other word) (?:of|for)|synonyms? (?:of|for|with)|synonymous (?:with|to)|"
       r"equivalent to|another (?:word|term) for|the same as saying|also (?:called|known as)|similar to|an? "
       r"(?:rephrase|restatement|paraphrase|rewording|simplification|summary|description) of|"
       r"interchangeable with)(?: saying)? (?P<b>.+)"),
    _t("entailment", "and_same",
       r"(?:both )?(?P<a>.+?) and (?P<b>.+?) (?:are|is|mean) (?:basically |essentially |all |both |just )?"
       r"(?:the same(?: thing| things| action| meaning)?|synonyms|synonymous|equivalent|interchangeable)"),
    _t("entailment", "kind_of",
       r"(?P<a>.+?) (?:is|are) (?:also )?(?:a |an |one |another )?(?:type|kind|form|sort|example|part|subset|"
       r"version|variety|style|instance|generali[sz]ation|category|class|way|method|means|mode|member|species|"
       r"breed|piece|component)s? of (?P<b>.+)"),
    _t("entailment", "implies",
       r"(?P<a>.+?) (?:implies|imply|implied|means|mean|indicates|indicate|shows|show|suggests|suggest|entails|"
       r"entail|denotes|denote|signifies|equals|is equal to|refers to|is referring to|is implied by|"
       r"is indicative of|proves|confirms)(?: that)? (?P<b>.+)"),
    _t("entailment", "if_then", r"if (?P<a>[^,]+?),? then (?P<b>.+)"),
    _t("entailment", "if_comma", r"if (?P<a>[^,]+?), (?P<b>.+)"),
    _t("entailment", "so",
       r"(?P<a>.+?),? (?:so|therefore|thus|hence|which means|meaning) (?:that )?(?P<b>.+)"),
    _t("entailment", "must_be",
       r"(?P<a>.+?) (?:must|has to|have to|would have to|would|will|should|needs to|need to) (?:also )?be "
       r"(?P<b>.+)", fallback=True),
    _t("entailment", "copula",
       rf"(?P<a>.+?) {_BE} (?:also |both |all |still |just |clearly |obviously )?"
       r"(?!not\b|never\b|n't)(?P<b>.+)", fallback=True),
    # ---- contradiction: not (A <=> B) (table 16)
    _t("contradiction", "cannot_both",
       rf"(?:(?P<s>.+?) )?{_CANT} (?:be )?(?:(?:both|simultaneously|also|at once) )*(?P<a>.+?),? and "
       rf"(?:(?:also|simultaneously|then) )*(?:be )?(?P<b>.+?)(?: {_SAME_TIME})?"),
    _t("contradiction", "both_cannot",
       rf"(?:both )?(?P<a>.+?) and (?P<b>.+?) {_CANT} (?:happen|occur|be done|be true|coexist|exist|both be "
       rf"true)(?: {_SAME_TIME})?"),
    _t("contradiction", "either_or",
       r"(?:.*? )?either (?P<a>.+?) or (?P<b>.+?)(?:,? (?:but )?not both)?"),
    _t("contradiction", "cannot_while",
       rf"(?:(?P<s>.+?) )?{_CANT} (?:be )?(?P<a>.+?) (?:while|when|if|whilst|as|during) (?:also )?(?P<b>.+?)"
       rf"(?: {_SAME_TIME})?"),
    _t("contradiction", "impossible",
       r"(?:it is |it's )?(?:impossible|not possible) (?:for (?P<s>.+?) )?to (?P<a>.+?) (?:while|and|when|if) "
       r"(?P<b>.+)"),
    _t("contradiction", "if_not",
       rf"if (?P<a>[^,]+?),? (?:then )?(?P<s>[^,]+?) (?:{_NOT_BE}|{_CANT}|(?:is|are) never) (?:be )?(?P<b>.+)"),
    _t("contradiction", "cannot_be",
       rf"(?P<a>.+?) {_CANT} (?:(?:simultaneously|also|possibly|ever|both) )?be (?P<b>.+)", fallback=True),
    _t("contradiction", "cannot_verb",
       r"(?P<s>.+?) (?:(?:usually|normally|typically|generally|would|could) )?(?:can't|cannot|can not|does not|"
       r"doesn't|do not|don't|would not|wouldn't|could not|couldn't|won't|will not) (?!be\b)(?P<b>.+)", fallback=True),
    _t("contradiction", "different",
       rf"(?P<a>.+?) {_BE} (?:(?:not the same (?:thing )?as)|(?:an? )?(?:(?:very|completely|totally|entirely) )?"
       r"(?:different|distinct)(?: \w+)? (?:from|than|to)|the opposite of) (?P<b>.+)"),
    _t("contradiction", "and_different",
       r"(?:both )?(?P<a>.+?) and (?P<b>.+?) (?:are|is) (?:two |very |completely |totally )?(?:different|"
       r"not the same|opposites|distinct|mutually exclusive)(?: \w+){0,2}"),
    _t("contradiction", "not_comma",
       r"(?:.*? )?(?P<a>\w+(?: \w+)?), not (?:an? |the )?(?P<b>\w+(?: \w+){0,4})"),
    _t("contradiction", "instead_of",
       r"(?:.*? )?(?P<a>\w+(?: \w+)?) (?:instead of|rather than) (?:an? |the )?(?P<b>\w+(?: \w+)?)"),
    _t("contradiction", "is_not",
       rf"(?P<a>.+?) {_NOT_BE} (?!(?:mentioned|stated|said|shown|implied|specified|given|known)\b)(?:an? )?"
       r"(?P<b>.+)", fallback=True),
    # ---- neutral: not (A => B) (table 17)
    _t("neutral", "just_because",
       rf"(?:just |only )?(?:because|since) (?P<a>[^,]+?),? (?:(?:then )?(?:it|that|this) )?{_NEG_DO} "
       rf"{_IMPLY}(?: that)? (?P<b>.+)"),
    _t("neutral", "have_to_to",
       r"(?P<s>.+?) (?:doesn't|does not|don't|do not|didn't|did not|needn't|need not|wouldn't|would not) "
       r"(?:necessarily )?(?:have|need|has) to (?:be )?(?P<b>.+?) (?:to|in order to|just to) (?P<a>.+)"),
    _t("neutral", "does_not_imply", rf"(?P<a>.+?),? {_NEG_DO} {_IMPLY}(?: that)? (?P<b>.+)"),
    _t("neutral", "no_indication_of",
       r"(?P<a>.+?) (?:is|are) (?:not (?:an? )?(?:indication|indicative|proof|evidence|sign)|no (?:indication|"
       r"proof|evidence|sign)) (?:of|that) (?P<b>.+)"),
    _t("neutral", "can_without", r"(?:.*? )?(?P<a>(?:can|could) .+?) without (?P<b>.+)"),
    _t("neutral", "other_than",
       r"(?P<a>.+?) (?:(?:for|by|in|at|with|doing) )?(?:reasons|a reason|purposes|other reasons|many reasons|"
       r"something|things|activities|places|ways|someone|somebody|anyone|people) (?:else )?(?:other than|besides|"
       r"beside|apart from) (?P<b>.+)"),
    _t("neutral", "not_all",
       r"not (?:all|every|each|everyone|everybody|every one|everything)(?: of the| of)? (?:who |that )?"
       r"(?P<s>.+?) (?:is|are|was|were|will|can|does|do|has|have|wants?) (?:an? )?(?P<b>.+)"),
    _t("neutral", "not_assumed",
       r"(?P<s>.+?) (?:(?:is|are|was|were) not|isn't|aren't|wasn't|weren't|can not be|cannot be|can't be|"
       r"should not be|shouldn't be) (?:necessarily )?(?:assumed|presumed|implied|known|said|shown|stated) to "
       r"(?:be |have )?(?P<b>.+)"),
    _t("neutral", "not_necessarily",
       rf"(?P<s>.+?) (?:{_NOT_BE}|(?:is|are|was|were) not) (?:necessarily|always|automatically|definitely|"
       r"certainly|for sure) (?:an? )?(?P<b>.+)"),
    _t("neutral", "may_not_be",
       r"(?P<s>.+?) (?:may|might|could|would|will) not (?:necessarily |always )?(?:be )?(?P<b>.+)", fallback=True),
    _t("neutral", "not_have_to",
       r"(?P<s>.+?) (?:doesn't|does not|don't|do not|didn't|did not|needn't|need not) (?:necessarily |always )?"
       rf"(?:(?:have|need|has) to )?(?:be )?(?!{_IMPLY}\b)(?P<b>.+)", fallback=True),
    _t("neutral", "no_evidence",
       r"(?:there is |there's |there are |there was |we have |we see |i see )?(?:no|not any|not enough|nothing "
       r"to give) (?:evidence|indication|indicator|proof|sign|mention|information|info|reason to (?:think|"
       r"believe|assume|suggest)|way (?:to|of) (?:know|knowing|tell|telling|assume|assuming|say|determine|infer|be "
       r"sure)|idea)(?: that| of| if| whether| for|"
       r" to show| to suggest| suggesting| showing| stating| saying)? (?P<b>.+)"),
    _t("neutral", "cannot_tell",
       r"(?:(?:we|you|one|i|it|they) )?(?:can't|cannot|can not|cant|don't|do not|didn't|did not|couldn't|"
       r"could not|(?:is|'s) not possible to|is impossible to) (?:really |necessarily |automatically )?(?:tell|"
       r"know|infer|assume|say|conclude|determine|be sure|be certain|deduce|be assumed|be inferred|"
       r"be determined|be concluded|see)(?: for sure| for certain| with certainty)?(?: that| if| whether)? "
       r"(?P<b>.+)"),
    _t("neutral", "not_stated",
       r"it (?:is|'s|was) (?:not |un)(?:clear|known|stated|implied|said|mentioned|specified|indicated|given|"
       r"certain|evident|obvious|sure|apparent|necessarily true)(?: that| if| whether)? (?P<b>.+)"),
    _t("neutral", "premise_silent",
       r"(?:sentence (?:1|one)|the first sentence|the premise|the description|the picture|the photo|it|nothing)"
       r"(?: doesn't| does not| didn't| did not| never)? (?:say|says|state|states|mention|mentions|specify|"
       r"specifies|indicate|indicates|imply|implies|suggest|suggests|show|shows)(?: that| if| whether| anything "
       r"about)? (?P<b>.+)"),
    _t("neutral", "not_mentioned",
       r"(?P<b>.+?) (?:is|are|was|were) (?:not|never) (?:mentioned|stated|implied|specified|said|indicated|"
       r"given|shown|known|evident|confirmed|certain|clear)"),
)

_FILLER = re.compile(r"^(?:(?:and|but|so|also|then|thus|therefore|hence|obviously|clearly|however|well|yes|no|"
                     r"that|plus)\s+)+")
_SPAN_LEAD = re.compile(r"^(?:(?:that|the fact that|also|both|simultaneously|then|just because|because|since|"
                        r"whether|if|just|necessarily|really|actually|be|being|the (?:word|term|"
                        r"phrase)s?)\s+)+")
_SPAN_TAIL = re.compile(rf"(?:\s+(?:{_SAME_TIME}|as well|too|also|either|both|necessarily))+$")
_META = re.compile(r"^(?:the )?(?:(?:first|second|1st|2nd) )?(?:sentence|premise|hypothesis|statement|picture|"
                   r"photo|image)s?\b")
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|;\s*")
_CHUNKS = re.compile(r"\s*,\s*")
_CLAUSES = re.compile(r",?\s+(?:and|but|so|because|since|although|though|whereas)\s+")


def units(explanation: str) -> list[str]:
    """The sentences of a normalised explanation, then their comma chunks, then their clauses; de-duplicated,
    lower-cased, without final punctuation and leading fillers ('and', 'so', 'also' ...)."""
    seen: dict[str, None] = {}
    sentences = [s for s in _SENTENCES.split(normalise(explanation).lower()) if s.strip()]
    for level in (lambda s: [s], _CHUNKS.split, _CLAUSES.split):
        for sentence in sentences:
            for unit in level(sentence.strip().rstrip(".!?;:").strip()):
                unit = _FILLER.sub("", unit.strip(" ,\"'")).strip()
                if unit:
                    seen.setdefault(unit, None)
    return list(seen)


def clean_span(span: str | None) -> str | None:
    """A span without quotes, edge punctuation, a leading 'that' / adverb and a trailing 'at the same time';
    None when what is left has no content word, spans a comma (two clauses), names the sentences themselves
    or is too long."""
    if span is None:
        return None
    s = span.strip(" ,.;:!?\"'`")
    for _ in range(3):
        s = _SPAN_TAIL.sub("", _SPAN_LEAD.sub("", s)).strip(" ,.;:!?\"'`")
    if not s or "," in s or not has_content(s) or _META.match(s) or len(tokens(s)) > MAX_SPAN_WORDS:
        return None
    return s


_PREPOSITIONS = frozenset("on in at with near by under inside outside behind beside next from into onto over "
                          "across along around through against without".split())


def subject_modifier(subject: str) -> str | None:
    """What a subject says beyond its head noun, as a predicate: 'a man riding a bike' -> 'riding a bike', 'a man
    on a street corner' -> 'on a street corner', 'a person who is asleep' -> 'is asleep'; None for a bare noun
    phrase ('construction workers')."""
    words = tokens(subject)
    for i, w in enumerate(words):
        if w.lower in ("who", "that", "which") and i + 1 < len(words):
            return subject[words[i + 1].start:]
        past = i > 0 and w.lower.endswith("ed") and len(w.text) > 4 and words[i - 1].lower not in DETERMINERS
        if is_participle(w.text) or w.lower in _PREPOSITIONS or past:
            return subject[w.start:]
    return None


class RuleExtractor:
    """Candidate relations of an explanation from the templates of its label, best first (backend 'rules', or
    the name given, e.g. 'fallback:rules' when standing in for an LLM)."""

    def __init__(self, templates: tuple[Template, ...] = TEMPLATES, backend: str = RULES):
        self.templates = templates
        self.backend = backend

    def relations(self, explanation: str, label: str) -> list[Relation]:
        """Every template match of `label`'s templates over the explanation's units, de-duplicated, in
        template order then unit order; matches that leave an empty or content-free span are skipped."""
        if label not in NLI_LABELS:
            raise ValueError(f"label {label!r} is not one of {NLI_LABELS}")
        kind = KIND_OF_LABEL[label]
        parts = units(explanation)
        found: dict[tuple[str | None, str], Relation] = {}
        specific: set[str] = set()  # units a specific template matched: generic (fallback) ones skip them
        for template in self.templates:
            if template.label != label:
                continue
            for unit in parts:
                if template.fallback and unit in specific:
                    continue
                m = template.regex.fullmatch(unit)
                if m is None:
                    continue
                if not template.fallback:
                    specific.add(unit)
                b = clean_span(m.group("b"))
                if template.a_from_subject:
                    a = clean_span(subject_modifier(m.group("s") or ""))
                else:
                    a = clean_span(m.group("a")) if "a" in template.regex.groupindex else None
                if b is None or (a is None and kind != "non_implication"):
                    continue
                if template.name == "E.copula" and is_participle(tokens(b)[0].text):
                    continue  # 'the girl is standing' states a predicate, not an equivalence of two terms
                found.setdefault((a, b), Relation(kind, a, b, self.backend, template.name))
        return list(found.values())

    def extract(self, explanation: str, hypothesis: str, label: str) -> Extraction:
        """The candidate relations (the hypothesis is not needed by the rules; see `build_counterfactuals`)."""
        del hypothesis
        if not explanation or not explanation.strip():
            return Extraction((), self.backend, REASON_EMPTY_EXPLANATION)
        found = self.relations(explanation, label)
        return Extraction(tuple(found), self.backend, None if found else REASON_NO_TEMPLATE)
