"""Is a task written in the language asked? A small, dependency-free guess.

Scripts decide for languages that have their own (CJK, Cyrillic, Arabic...); for Latin-script
languages, the share of each language's commonest function words decides. Short or ambiguous
texts return None ("cannot tell"), and the validator keeps those: dropping a good task for a
guess would be worse than keeping one in a near language.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOPWORDS: dict[str, frozenset[str]] = {
    "en": _words("the a an of to in on for is are was what which who how many much does do can i my me you your "
                 "and or with it this that there at from by be have has all any"),
    "fr": _words("le la les un une des du de et est sont que qui quel quelle quels combien pour dans sur avec "
                 "je mon ma mes vous votre il elle ce cette au aux pas"),
    "de": _words("der die das ein eine und ist sind was wer wie viele welche welcher für mit auf in im ich mein "
                 "meine sie ihr es den dem nicht von zu"),
    "es": _words("el la los las un una unos de del y es son que qué cuál cuántos cuántas para en con por mi mis "
                 "tu su al hay está"),
    "it": _words("il lo la gli le un una di del della e è sono che quale quanti quante per in con mio mia "
                 "tuo suo al ci"),
    "pt": _words("o a os as um uma de do da e é são que qual quantos quantas para em com por meu minha "
                 "seu sua no na há"),
    "nl": _words("de het een en is zijn wat wie hoe hoeveel welke voor met op in ik mijn jij uw er van"),
}  # fmt: skip

_SCRIPTS: list[tuple[str, re.Pattern[str]]] = [
    ("ja", re.compile(r"[\u3040-\u30ff]")),
    ("ko", re.compile(r"[\uac00-\ud7af]")),
    ("zh", re.compile(r"[\u4e00-\u9fff]")),
    ("ru", re.compile(r"[\u0400-\u04ff]")),
    ("ar", re.compile(r"[\u0600-\u06ff]")),
]


def detect_language(text: str) -> str | None:
    """An ISO 639-1 guess, or None when the text gives too little to tell."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return None
    for code, pattern in _SCRIPTS:
        if len(pattern.findall(text)) >= max(2, len(letters) // 4):
            return code
    words = [w.lower() for w in _WORD.findall(text)]
    if len(words) < 3:
        return None
    scores = {code: sum(w in sw for w in words) for code, sw in _STOPWORDS.items()}
    best = max(scores, key=lambda c: scores[c])
    ranked = sorted(scores.values(), reverse=True)
    if ranked[0] < 2 or ranked[0] == ranked[1]:
        return None
    return best


def matches_language(text: str, language: str) -> bool:
    """False only when the text is confidently in another language."""
    found = detect_language(text)
    if found is None:
        return True
    if language == "zh" and found == "ja":
        return True  # kanji-heavy Japanese and Chinese are hard to split; don't drop on it
    return found == language
