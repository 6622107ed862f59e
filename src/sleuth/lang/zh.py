"""Chinese word lists and patterns: abstention, yes/no, question words (one place for every layer)."""

from __future__ import annotations

#: an answer that declines: the documents do not settle the question (searched anywhere in a text)
ABSTAIN = (
    r"无法回答|不能回答|无法确定|无法判断|无法得知|无从|不足以|无答案|证据不足|信息不足|不知道|未知"
    r"|(?:没有|未|并未|并没有)(?:直接|明确|具体)?(?:给出|提供|相关|提到|提及|涉及|说明|规定|找到|包含|记载)"
)
CANNOT = r"无法回答|不能回答"
#: a reply that opens by saying it has nothing
NOTHING = r"未知|文档中没有|没有找到|未找到|没有有用的信息|无有用信息|没有相关|无法回答|不知道"
#: the answer line the formats ask for ("所以答案是：", "所以最终答案是：") and its bare label
ANSWER_IS = "所以(?:最终)?答案是"
FINAL_ANSWER = "最终答案"
YES_WORDS = frozenset({"是", "是的", "对", "可以", "能"})
NO_WORDS = frozenset({"否", "不", "不是", "不能", "不可以"})
#: a whole answer that is a yes or a no
YES_NO_ANSWERS = "是|否|不是|对|不对|正确|错误|能|不能|可以|不可以|会|不会|有|没有"
#: the first words of a negative conclusion ("不是", "不需要", "不可以" …); checked before the positive ones
NO_START = (
    r"不是|不需要|不用|不必|无需|无须|不能|不可以|不可|不得|不会|不适用|不属于|不要|不行|不允许|不予|不应|"
    r"不按|不在|不包括|不含|没有|不|否"
)
#: the first words of a positive conclusion
YES_START = (
    r"是的|是(?!否)|需要|要的|可以|能够|能|必须|应当|应该|仍然|仍需|仍要|仍应|仍|依然|适用|属于|对的|对|允许|包含|包括"
)
#: a yes/no question: 是否 / 是不是 / 能否 / …吗
YES_NO_QUESTION = r"是否|是不是|能否|可否|有没有|[吗么][？?]?$"
#: the question words (what a follow-up asks for)
WH = r"谁|哪|什么|何时|多少|几|怎么|为什么"
#: the joiner of a comparison's two options ("A还是B")
OR = "还是"

#: characters that carry no content (overlap, grounding and repeat checks leave them out)
STOPWORDS = frozenset("的了吗呢是在和与及或对于把被从到吧啊么什谁哪怎个")
#: the digits and units of Chinese numerals (十五 -> 15), and the characters of both
DIGITS = {ch: i for i, ch in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
UNITS = {"十": 10, "百": 100, "千": 1000}
NUMERAL_CHARS = "".join(DIGITS) + "".join(UNITS)


def numeral(text: str) -> str:
    """A Chinese numeral in digits (digits allowed): 十五 -> 15, 一百零二 -> 102, 一千零十 -> 1010; without a unit the
    digits as written (一九一六 -> 1916, 〇八 -> 08)."""
    if not any(ch in UNITS for ch in text):
        return "".join(str(DIGITS.get(ch, ch)) for ch in text)
    total, digit = 0, 0
    for ch in text:
        if ch in UNITS:
            total, digit = total + (digit or 1) * UNITS[ch], 0
        else:
            digit = DIGITS[ch] if ch in DIGITS else int(ch)
    return str(total + digit)
