"""Python's lexical vocabulary, shared by the syntax constraint's lexer
(`python_syntax`) and its full-vocabulary masks (`python_syntax_mask`): keywords,
operators, brackets, string prefixes, the lexer's modes and string phases, the character
runs the lexer consumes at once, and the number automaton; and `code_starts`, the one
scan of a prompt that says where its last code line and its last statement begin (the API
and keyword constraints lex the prompt from there).
"""

from __future__ import annotations

import bisect
import re

from adaptrack_lsp.apis.document import common_prefix_length

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
#: escaped byte (a piece of a character split between tokens, `vocab.py`) is
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


# -- prompt scanning ---------------------------------------------------------------------------
_PROMPT_SCAN = re.compile(r"[#'\"\n()\[\]{}]")
#: the scan keeps its state every this many characters: the next prompt, which shares its
#: start with the last one (a keystroke later), is scanned from the last kept state
#: before the first changed character
CHECKPOINT_CHARS = 1024
#: (prompt, answer, kept states) of the last `code_starts` call, replaced as one object
#: (threads share it)
_last_scan: tuple = (None, (0, 0), ())


def escaped(text: str, index: int) -> bool:
    """Whether the character at `index` is preceded by an odd run of backslashes."""
    count = 0
    index -= 1
    while index >= 0 and text[index] == "\\":
        count += 1
        index -= 1
    return count % 2 == 1


def code_starts(prefix: str) -> tuple[int, int]:
    """(line, statement): the start of the last line of `prefix` that begins in code (not
    inside a string or comment), and the start of the last such line that is also outside
    every bracket and not continued by a backslash.  Lexing from the first in fresh code
    mode gives the lexer state at the end of `prefix`; lexing from the second with an
    empty bracket stack gives the brackets open there (unbalanced closers count as noise).

    One pass of C-speed searches; the last answer is kept, as both constraints ask about
    the same prompt, and the next prompt is scanned from the last state kept before the
    first character that differs (`CHECKPOINT_CHARS`)."""
    global _last_scan
    last_prefix, last_answer, states = _last_scan
    if last_prefix is prefix or last_prefix == prefix:
        return last_answer
    kept: tuple = ()
    if last_prefix is not None and states:
        common = common_prefix_length(last_prefix, prefix)
        # a state at `position` has read the text up to and including `position`
        kept = states[: bisect.bisect_left(states, (common,))]
    answer, found = _code_starts(prefix, kept[-1] if kept else (0, 0, 0, 0))
    _last_scan = (prefix, answer, kept + found)
    return answer


def _code_starts(prefix: str, state: tuple[int, int, int, int]) -> tuple[tuple[int, int], tuple]:
    """The answer of `code_starts`, scanning from `state` (position, line, statement,
    depth: the scan's state in code at `position`), and the states passed on the way
    (every `CHECKPOINT_CHARS` characters)."""
    position, line, statement, depth = state
    length = len(prefix)
    search = _PROMPT_SCAN.search
    states = []
    checkpoint = position + CHECKPOINT_CHARS
    while position < length:
        if position >= checkpoint:
            states.append((position, line, statement, depth))
            checkpoint = position + CHECKPOINT_CHARS
        match = search(prefix, position)
        if match is None:
            break
        char, index = match.group(), match.start()
        position = index + 1
        if char == "\n":
            line = position
            if depth == 0 and not (index and prefix[index - 1] == "\\"):
                statement = position
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = depth - 1 if depth else 0
        elif char == "#":
            end = prefix.find("\n", index)
            if end < 0:
                break
            position = end  # the newline is processed next
        elif prefix.startswith(char * 3, index):
            closing, at = char * 3, index + 3
            while True:
                end = prefix.find(closing, at)
                if end < 0:
                    return (line, statement), tuple(states)  # inside an open triple-quoted string
                if escaped(prefix, end):
                    at = end + 1
                    continue
                position = end + 3
                break
        else:
            at = index + 1
            while True:
                quote = prefix.find(char, at)
                newline = prefix.find("\n", at)
                end = quote if newline < 0 or (0 <= quote < newline) else newline
                if end < 0:
                    return (line, statement), tuple(states)  # inside an open string on the last line
                if escaped(prefix, end):
                    at = end + 1
                    continue
                position = end if end == newline else end + 1  # an unterminated string ends at the line break
                break
    return (line, statement), tuple(states)
