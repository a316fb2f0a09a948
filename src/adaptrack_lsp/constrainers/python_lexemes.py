"""Python's lexical vocabulary, shared by the syntax constraint's lexer
(`python_syntax`) and its full-vocabulary masks (`python_syntax_mask`): keywords,
operators, brackets, string prefixes, the lexer's modes and string phases, the character
runs the lexer consumes at once, and the number automaton.
"""

from __future__ import annotations

import re

KEYWORDS = frozenset(
    "False None True and as assert async await break class continue def del elif else except "
    "finally for from global if import in is lambda nonlocal not or pass raise return try while "
    "with yield".split()
)
SOFT_KEYWORDS = frozenset(("match", "case"))
OPERATORS = frozenset(
    "+ - * ** / // % @ << >> & | ^ ~ := < > <= >= == != , : . ; = -> += -= *= /= //= %= @= &= |= "
    "^= >>= <<= **= ...".split()
)
_OPERATOR_PREFIXES = frozenset(op[:i] for op in OPERATORS for i in range(1, len(op) + 1)) | {".."}
_OPERATOR_CHARS = frozenset("".join(OPERATORS) + "!")
BRACKETS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = {")": "(", "]": "[", "}": "{"}
STRING_PREFIXES = frozenset(("r", "u", "b", "f", "br", "rb", "fr", "rf"))
_NUMBER_COMPLETE = frozenset(("D", "Z", "XD", "OD", "BD", "F", "FD", "ED", "J"))
_HEX = frozenset("0123456789abcdefABCDEF")
_DIGITS = frozenset("0123456789")

# lexer modes (the second element of a state)
_LINE = 0  # at a logical line's start; data: indentation so far
_CODE = 1  # between lexemes; data: None
_NAME = 2  # data: the identifier so far
_NUMBER = 3  # data: the number automaton's state
_OP = 4  # data: the operator so far
_STRING = 5  # data: (phase, quote, is_bytes, escape, closing quotes seen)
_COMMENT = 6  # data: None
_BACKSLASH = 7  # data: None ("\" seen; a newline must follow)
_FREE = 8  # the check gave up (too many readings): everything is accepted

_OPEN1, _OPEN2, _BODY, _TRIPLE = 1, 2, 3, 4  # string phases

#: identifier characters (as `re`'s \w; other XID characters are checked one by one).  An
#: escaped byte (a piece of a character split between tokens, `completion/vocab.py`) is
#: not one: constrainers see split characters as non-identifier characters
_IDENT_RUN = re.compile(r"\w+")
_SPACE_RUN = re.compile(r"[ \t\f\r]+")
_COMMENT_RUN = re.compile(r"[^\n]*")
_INDENT_RUN = re.compile(r"[ \t\f\r]*")
_STRING_RUNS = {
    ('"', False): re.compile(r'[^"\\\n]+'),
    ("'", False): re.compile(r"[^'\\\n]+"),
    ('"', True): re.compile(r'[^"\\]+'),
    ("'", True): re.compile(r"[^'\\]+"),
}
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _number_step(state: str, char: str) -> str | None:
    """The number automaton: the state after `char`, or None when `char` ends the number."""
    if state in ("D", "Z", "FD", "F", "ED"):
        if char in _DIGITS:
            return "ED" if state == "ED" else ("FD" if state in ("F", "FD") else "D")
        if char == "_":
            return {"D": "U", "Z": "U", "FD": "FU", "ED": "EU"}.get(state)
        if char in "jJ":
            return "J"
        if state in ("D", "Z") and char == ".":
            return "F"
        if state in ("D", "Z", "F", "FD") and char in "eE":
            return char  # "e" / "E": an exponent may follow
        if state == "Z":
            if char in "xX":
                return "X"
            if char in "oO":
                return "O"
            if char in "bB":
                return "B"
        return None
    if state in ("U", "FU", "EU"):
        return {"U": "D", "FU": "FD", "EU": "ED"}[state] if char in _DIGITS else "!"
    if state in ("e", "E", "ES"):
        if char in _DIGITS:
            return "ED"
        if state != "ES" and char in "+-":
            return "ES"
        return None
    if state in ("X", "O", "B", "XD", "OD", "BD", "XU", "OU", "BU"):
        kind = state[0]
        allowed = _HEX if kind == "X" else (frozenset("01234567") if kind == "O" else frozenset("01"))
        if char in allowed:
            return kind + "D"
        if char == "_" and not state.endswith("U"):
            return kind + "U"
        if state.endswith("D"):
            return None
        return "!"
    return None  # "J"
