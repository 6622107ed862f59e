"""The question analysis: its language and the kind of answer it expects (yes/no, one of its own
two options, a person, a date, a place, a number or some other entity; several parts or one),
computed once per question (:func:`analyze`, kept on the run's state) and read by every step.

:func:`answer_type` is deterministic and reads only the question's wording (its
interrogative and the head noun after "which/what"); nothing here looks at a model.
The prompts state the type (``$expected``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sleuth.lang import detect_lang
from sleuth.lang.en import AUX as _AUX

YESNO = "yesno"
CHOICE = "choice"  # one of the question's own options ("Who was born first, A or B?")
PERSON = "person"
DATE = "date"
PLACE = "place"
NUMBER = "number"
ENTITY = "entity"
LIST = "list"  # a detail: several parts are asked for


@dataclass(frozen=True)
class AnswerType:
    """``kind`` (one of the constants above), the options of a choice, and a finer ``detail``:
    ``year`` (a year is asked), ``country`` / ``city`` (which level of place), ``count``
    ("how many": a bare number), ``list`` (the question asks for several parts: "分别", "哪些",
    "发布时间和处理器", "respectively"; every part belongs in the answer), or ``""``."""

    kind: str
    options: tuple[str, ...] = ()
    detail: str = ""

    def expected(self, lang: str = "en") -> str:
        """The expected answer in words, for the short-answer prompt."""
        zh = lang == "zh"
        if self.detail == LIST:
            return (
                "问题问到的每一项（用顿号分隔，一项也不要漏）"
                if zh
                else "every item the question asks for, separated by commas"
            )
        if self.kind == CHOICE and len(self.options) == 2:
            a, b = self.options
            return f"“{a}”或“{b}”之一" if zh else f'one of "{a}" or "{b}"'
        if zh:
            return {
                YESNO: "“是”或“否”",
                PERSON: "一个人名",
                DATE: "一个年份" if self.detail == "year" else "一个日期或年份",
                PLACE: "一个国家名" if self.detail == "country" else "一个地名",
                NUMBER: "一个数字",
            }.get(self.kind, "一个名称或几个词")
        return {
            YESNO: "yes or no",
            PERSON: "the name of a person",
            DATE: "a year" if self.detail == "year" else "a date or a year",
            PLACE: "the name of a country" if self.detail == "country" else "the name of a place",
            NUMBER: "a number",
        }.get(self.kind, "a name or a few words")


# -- English ------------------------------------------------------------------------

_WS = re.compile(r"\s+")
_YESNO_EN = re.compile(rf"^{_AUX}\b", re.I)
_OPT = r"([^,:?]{1,80}?)"
_CMP_WORD = (
    r"(?:older|younger|earlier|later|first|last|bigger|larger|smaller|taller|shorter|longer|higher|lower|closer"
    r"|further|farther|newer|greater|fewer|wider|deeper|heavier|faster|slower|recently)"
)
_CMP = rf"(?:{_CMP_WORD}|more\s+\w+|less\s+\w+)"
#: "…, A or B?"  /  "…: A or B?"  /  "Who is older A or B?" (the options after a comparative)
_OR_TAIL = re.compile(rf"(?:[,:]|\b{_CMP})\s*{_OPT},?\s+or\s+{_OPT}\s*\??$", re.I)
#: "Which director, A or B, is …?"
_OR_MID = re.compile(rf"^(?:who|which|what)\b[^,?]{{0,40}},\s*{_OPT},?\s+or\s+{_OPT}\s*,", re.I)
#: "Between A and B, who …?"  /  "In between A and B which …?"
_BETWEEN = re.compile(r"^(?:in\s+)?between\s+([^,?]{1,80}?)\s+and\s+([^,?]{1,80}?)\s*(?:,|\s(?=who|which|what))", re.I)
#: "Who was born first of A and B?"
_OF_AND = re.compile(rf"\b{_CMP_WORD}\s+(?:of|between)\s+([^,?]{{1,80}}?)\s+and\s+([^,?]{{1,80}}?)\s*\??$", re.I)
#: "Is A or B older?"
_OR_AUX = re.compile(rf"^{_AUX}\s+(?:the\s+)?{_OPT}\s+or\s+(?:the\s+)?{_OPT}\s+(\w+er|more|less|first)\b", re.I)
#: the predicate "Is A or B the genus of more …?" leaves on its second option: an article and
#: lower-case words ("Brabejum the genus of"); a title's own article is followed by a capital
_PREDICATE = re.compile(r"\s+(?:the|a|an)(?:\s+[a-z][\w-]*)+$")

_COUNT_EN = re.compile(r"\bhow\s+many\b", re.I)
_YEAR_EN = re.compile(r"\b(?:what|which)\s+(?:(?:is|was)\s+the\s+)?year\b", re.I)
_COUNTRY_EN = re.compile(
    r"\b(?:what|which)\s+(?:(?:is|was)\s+the\s+)?(?:country|nation|nationality)\b|\bcountry\s+of\s+(?:citizenship|origin)\b",
    re.I,
)
_CITY_EN = re.compile(r"\b(?:what|which)\s+(?:city|town|village)\b", re.I)
_WH = r"\b(?:what|which)\s+(?:(?:is|was|are|were)\s+the\s+)?"
#: each interrogative with the kind it asks for; the question's first interrogative decides
#: (earliest match; at one position the earlier entry of this list wins)
_WH_EN: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        NUMBER,
        re.compile(
            r"\bhow\s+(?:many|much|old|long|tall|high|far|large|big|deep|wide|often)\b"
            rf"|{_WH}(?:number|percentage|population|amount|age)\b",
            re.I,
        ),
    ),
    (
        DATE,
        re.compile(rf"\bwhen\b|{_WH}(?:year|date|day|month|century|decade|time\s+period)\b", re.I),
    ),
    (
        PLACE,
        re.compile(
            rf"\bwhere\b|{_WH}(?:country|nation|nationality|city|town|village|state|county|province"
            r"|region|continent|place|location|island|territory|administrative\s+territorial\s+entity)\b"
            r"|\bcountry\s+of\s+(?:citizenship|origin)\b",
            re.I,
        ),
    ),
    (PERSON, re.compile(rf"\bwhom?\b|{_WH}(?:person|man|woman)\b", re.I)),
    (ENTITY, re.compile(r"\b(?:what|which|whose)\b", re.I)),
)


_DESCRIPTOR = re.compile(r"^(?:[a-z][\w-]*\s+)+(?=[A-Z0-9\"“])")


#: a question that opens with its interrogative (after at most two words: "In what city …")
_WH_OPENS = re.compile(r"^(?:\S+\s+){0,2}?(?:who|whom|whose|what|which|when|where|how)\b", re.I)


def _options(found: tuple[str, str]) -> tuple[str, ...]:
    """The two options, without a lower-case descriptor before a name ("two scientists A" -> "A")."""
    opts = tuple(_DESCRIPTOR.sub("", _WS.sub(" ", o).strip()).strip(" \"'“”") for o in found)
    if all(opts) and opts[0].lower() != opts[1].lower():
        return opts
    return ()


def _answer_type_en(q: str) -> AnswerType:
    if _YESNO_EN.match(q):
        m = _OR_AUX.match(q)
        if m and (opts := _options((m.group(1), _PREDICATE.sub("", m.group(2))))):
            return AnswerType(CHOICE, opts)
        return AnswerType(YESNO)
    # "What is the year of the event which occurred first, A or B?" asks for a year, not an option
    opens_with = next((k for k, pat in _WH_EN if (m := pat.match(q)) and m.start() == 0), None)
    if opens_with not in (DATE, NUMBER):
        for pat in (_OR_MID, _BETWEEN, _OR_TAIL, _OF_AND):
            m = pat.search(q)
            if m and (opts := _options((m.group(1), m.group(2)))):
                return AnswerType(CHOICE, opts)
    if _WH_OPENS.match(q):  # "Who was president when …": the opening interrogative
        found = [(m.start(), i) for i, (_, pat) in enumerate(_WH_EN) if (m := pat.search(q))]
        pick = min(found) if found else None
    else:  # "… the aristocrat who is estimated to be worth how much?": the last one asks
        found = [(-ms[-1].start(), i) for i, (_, pat) in enumerate(_WH_EN) if (ms := list(pat.finditer(q)))]
        pick = min(found) if found else None
    if pick is None:
        return AnswerType(ENTITY)
    kind = _WH_EN[pick[1]][0]
    if kind == NUMBER:
        return AnswerType(NUMBER, detail="count" if _COUNT_EN.search(q) else "")
    if kind == DATE:
        return AnswerType(DATE, detail="year" if _YEAR_EN.search(q) else "")
    if kind == PLACE:
        detail = "country" if _COUNTRY_EN.search(q) else "city" if _CITY_EN.search(q) else ""
        return AnswerType(PLACE, detail=detail)
    return AnswerType(kind)


# -- Chinese ------------------------------------------------------------------------

_CHOICE_ZH = re.compile(r"([^，,？?。]{1,30}?)还是([^，,？?。更较]{1,30})(?:(?:更|比较|较)[^，,？?。]*)?[？?]?$")
_BETWEEN_ZH = re.compile(
    r"([^，,？?。和与]{1,30})(?:和|与|跟)([^，,？?。和与]{1,30}?)(?:之间|两者|两人)?(?:中|里)?[，,]?(?:谁|哪个|哪一个|哪位)"
)
_YESNO_ZH = re.compile(r"是否|是不是|能不能|可不可以|有没有|会不会|吗\s*[？?]?\s*$")
_DATE_ZH = re.compile(r"何时|什么时候|哪一年|哪年|哪一天|哪天|几月|几号|几时|何年|什么时间|哪个时间|什么年份|哪个年代")
_YEAR_ZH = re.compile(r"哪一年|哪年|何年|什么年份")
_NUMBER_ZH = re.compile(r"多少|几|多大|多长|多高|多远|多久|百分之几|比例")
_COUNT_ZH = re.compile(r"多少(?:个|位|人|次|家|种|名|座|本|部|条)|几(?:个|位|人|次|家|种|名|座|本|部|条)")
_PLACE_ZH = re.compile(r"哪里|哪儿|在哪|何地|何处|什么地方|哪个(?:国家|城市|省|州|地区)|哪座城市|哪国|哪一国")
_COUNTRY_ZH = re.compile(r"哪个国家|哪国|哪一国|什么国家")
_CITY_ZH = re.compile(r"哪个城市|哪座城市|什么城市")
_PERSON_ZH = re.compile(r"谁|哪位|哪个人")


#: several parts asked at once: "分别", "哪些", "各是", "有谁", or two things joined by 和/与/及 ("…的发布时间和处理器？",
#: "上海和北京2023年新任市长是谁？"); a single-answer question told so still gets its one item
_LIST_ZH = re.compile(
    r"分别|哪些|各是|各自|有谁|[^，,？?。]{1,12}(?:和|与|及|以及)[^，,？?。]{1,12}"
    r"|[？?].*\S.*[？?]?$|(多少|谁|哪|什么|何时)[^？?]{1,20}\1"  # two questions in one: "…是什么类型的电影？它的导演是谁？"
)
_EACH_ZH = re.compile(r"分别|各是|各自")
_LIST_EN = re.compile(r"\brespectively\b", re.I)


def _answer_type_zh(q: str) -> AnswerType:
    t = _answer_type_zh_one(q)
    return AnswerType(t.kind, t.options, LIST) if t.kind != CHOICE and _LIST_ZH.search(q) else t


def _answer_type_zh_one(q: str) -> AnswerType:
    for pat in (_CHOICE_ZH, _BETWEEN_ZH):
        m = pat.search(q)
        # "A和B分别是谁" asks for both; "上海和北京…市长是谁" asks who is (是谁), not which of the two
        if m and not _EACH_ZH.search(q) and (opts := _options((m.group(1), m.group(2)))) and not opts[1].endswith("是"):
            return AnswerType(CHOICE, opts)
    if _DATE_ZH.search(q):
        return AnswerType(DATE, detail="year" if _YEAR_ZH.search(q) else "")
    if _PLACE_ZH.search(q):
        detail = "country" if _COUNTRY_ZH.search(q) else "city" if _CITY_ZH.search(q) else ""
        return AnswerType(PLACE, detail=detail)
    if _PERSON_ZH.search(q):
        return AnswerType(PERSON)
    if _NUMBER_ZH.search(q):
        return AnswerType(NUMBER, detail="count" if _COUNT_ZH.search(q) else "")
    if _YESNO_ZH.search(q):
        return AnswerType(YESNO)
    return AnswerType(ENTITY)


#: a Han character (a Chinese question, span or option)
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def answer_type(question: str) -> AnswerType:
    """The answer ``question`` expects, from its wording (Chinese when it holds Han characters)."""
    q = _WS.sub(" ", (question or "")[:1000]).strip()
    if HAN.search(q):
        return _answer_type_zh(q)
    t = _answer_type_en(q)
    return AnswerType(t.kind, t.options, LIST) if t.kind != CHOICE and _LIST_EN.search(q) else t


@dataclass(frozen=True)
class Question:
    """One question, analysed once: its text, language and expected answer."""

    text: str
    lang: str
    type: AnswerType

    @property
    def yes_no(self) -> bool:
        return self.type.kind == YESNO

    @property
    def asks_yes_no(self) -> bool:
        """Some sentence of the question asks yes or no ("…需要提前申请吗？要提前几天？" does, though it asks a number)."""
        return self.yes_no or any(
            answer_type(p).kind == YESNO for p in re.split(r"(?<=[？?])\s*", self.text) if p.strip()
        )

    @property
    def options(self) -> tuple[str, ...]:
        """The two options of a comparison that names them ("…, A or B?"), else ``()``."""
        return self.type.options

    @property
    def parts(self) -> bool:
        """The question asks for several parts ("分别", "respectively")."""
        return self.type.detail == LIST

    def expected(self) -> str:
        return self.type.expected(self.lang)


def analyze(question: str, lang: str = "auto") -> Question:
    """The analysis of ``question``; ``lang`` ``auto`` is read from the question itself."""
    return Question(question, detect_lang(question) if lang == "auto" else lang, answer_type(question))
