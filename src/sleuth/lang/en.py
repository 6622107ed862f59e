"""English word lists and patterns: abstention, yes/no, question words (one place for every layer)."""

from __future__ import annotations

#: an answer that declines: the documents do not say, it cannot be answered (searched anywhere in a text)
ABSTAIN = (
    r"\bunknown\b|\bunanswerable\b|cannot\s+(?:be\s+)?(?:answered|determined|answer|determine)"
    r"|can't\s+(?:be\s+)?(?:answered|determined|answer|determine)"
    r"|(?:do|does|did)\s+not\s+(?:explicitly\s+|directly\s+|specifically\s+|clearly\s+)?"
    r"(?:provide|mention|contain|say|state|specify|include|give|answer)"
    r"|(?:is|are)\s+not\s+(?:explicitly\s+|directly\s+|specifically\s+|clearly\s+)?"
    r"(?:mentioned|provided|stated|specified|given|found)"
    r"|\bnot\s+(?:mentioned|stated|provided|found)\b|\bno\s+(?:specific\s+|relevant\s+)?(?:information|mention|answer)\b"
    r"|insufficient\s+(?:evidence|information)|not\s+enough\s+(?:evidence|information)"
)
#: a reply that says the question cannot be answered, in so many words
CANNOT = r"cannot be answered|can't be answered"
#: a reply that opens by saying it has nothing: "Unknown", "No helpful information found", "I don't know"
NOTHING = (
    r"unknown|not\s+(?:found|mentioned|stated|given)|(?:the\s+)?documents?\s+(?:do(?:es)?\s+not|don't)"
    r"|no\s+(?:helpful\s+|useful\s+|relevant\s+)?(?:information|answer|documents?|facts?)"
    r"|nothing\s+(?:(?:was|is)\s+)?found|i\s+(?:do\s+not|don't)\s+know"
)
#: the answer line the formats ask for ("So the answer is:", "So the final answer is:") and its bare label
ANSWER_IS = r"so\s+the\s+(?:final\s+)?answer\s+is"
FINAL_ANSWER = r"final\s+answer"
#: the words that decide a yes/no answer (metrics read the first of them)
YES_WORDS = frozenset({"yes", "true", "correct"})
NO_WORDS = frozenset({"no", "false", "incorrect", "not"})
#: a whole answer that is a yes or a no
YES_NO_ANSWERS = "yes|no|true|false"
#: the auxiliaries that open a yes/no question ("Is ...", "Did ...")
AUX = r"(?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|shall|may|might|must)"
#: the interrogatives that open a question asking for something other than yes/no
WH = r"(?:who|whom|whose|what|which|when|where|why|how)"
#: the joiner of a comparison's two options ("A or B")
OR = " or "


def _words(text: str) -> list[str]:
    return text.split()


#: words that carry no content (overlap, grounding and repeat checks leave them out)
STOPWORDS = frozenset(
    _words(
        """
        a an the of in on at to for from by with and or is are was were be been do does did what who whom whose
        which when where why how that this these those it its as into than then there their his her he she they
        them i you we us our your me my up so if not no yes
        """
    )
)
_UNITS = _words("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen")
_UNITS += _words("sixteen seventeen eighteen nineteen twenty")
_TENS = _words("thirty forty fifty sixty seventy eighty ninety")
#: number words as digits ("twelve" -> "12", "forty" -> "40")
NUMBER_WORDS = {w: str(i) for i, w in enumerate(_UNITS)} | {w: str(10 * i) for i, w in enumerate(_TENS, start=3)}
MONTHS = tuple(_words("january february march april may june july august september october november december"))
