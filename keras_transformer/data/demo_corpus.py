"""The embedded English-German demo corpus: a small generative grammar.

Each sentence is sampled once as language-neutral choices (a `Sentence`) and
realized in both languages, so every pair is a correct translation.
"""

import dataclasses
import functools
import os
import random

from keras_transformer.checks import is_integer
from keras_transformer.data import demo_lexicon as lex

SOURCE_LANG = "en"
TARGET_LANG = "de"
MIN_WORDS = 4
MAX_WORDS = 25

FRAMES = {
    "transitive": lex.TRANSITIVE_VERBS,
    "ditransitive": lex.DITRANSITIVE_VERBS,
    "dative": lex.DATIVE_VERBS,
    "intransitive": lex.INTRANSITIVE_VERBS,
    "reporting": lex.REPORTING_VERBS,
}
# English preposition -> (German preposition, the case it governs).
PREPOSITIONS = {
    "in": ("in", "dat"),
    "with": ("mit", "dat"),
    "for": ("für", "acc"),
    "without": ("ohne", "acc"),
}
CONJUNCTIONS = {"because": "weil", "if": "wenn", "when": "wenn", "that": "dass"}


@dataclasses.dataclass(frozen=True)
class NounPhrase:
    """A noun with determiner and adjective, or a name, or a pronoun.

    `head` is an English singular noun, a name or a subject pronoun;
    `determiner` is "the", "a", "my", "your", "his", "her", "our", "no",
    "count" (a number word from `count`) or "bare" (plural, no article).
    """

    head: str
    determiner: str = "the"
    plural: bool = False
    adjective: str | None = None
    count: int | None = None


@dataclasses.dataclass(frozen=True)
class Clause:
    """One clause as choices: verb (English base form), frame, arguments.

    `verb="be"` is the copula with an adjective `predicate` or an `age`;
    `indirect` is the dative object of ditransitive verbs; `prep` is an
    (English preposition, noun phrase) pair; `time` is an (English, German)
    adverbial.
    """

    subject: NounPhrase
    verb: str
    frame: str = "transitive"
    obj: NounPhrase | None = None
    indirect: NounPhrase | None = None
    modal: str | None = None
    prep: tuple | None = None
    predicate: str | None = None
    age: int | None = None
    time: tuple | None = None


@dataclasses.dataclass(frozen=True)
class Sentence:
    """A main clause, optionally a fronted time or a subordinate clause."""

    main: Clause
    conjunction: str | None = None
    sub: Clause | None = None
    sub_first: bool = False
    front_time: bool = False


def _person(phrase):
    if phrase.head in lex.PRONOUNS:
        return lex.PRONOUNS[phrase.head][1]
    return "3pl" if phrase.plural else "3sg"


def _english_np(phrase):
    if phrase.head in lex.PRONOUNS or phrase.head in lex.NAMES:
        return [phrase.head]
    adjective = lex.ADJECTIVES[phrase.adjective] if phrase.adjective else None
    return lex.english_noun_phrase(
        lex.NOUNS[phrase.head],
        phrase.determiner,
        phrase.plural,
        adjective,
        phrase.count,
    )


def _german_np(phrase, case):
    if phrase.head in lex.PRONOUNS:
        if case != "nom":
            raise ValueError(
                "Pronouns are only used as subjects in the demo grammar; use "
                f"a noun or a name. Received: head={phrase.head!r}"
            )
        return [lex.PRONOUNS[phrase.head][0]]
    if phrase.head in lex.NAMES:
        return [phrase.head]
    adjective = lex.ADJECTIVES[phrase.adjective] if phrase.adjective else None
    return lex.german_noun_phrase(
        lex.NOUNS[phrase.head],
        phrase.determiner,
        phrase.plural,
        adjective,
        phrase.count,
        case,
    )


def _prepositional_phrase(prep):
    preposition, phrase = prep
    german, case = PREPOSITIONS[preposition]
    words = _german_np(phrase, case)
    if german == "in" and words[0] == "dem":
        return [preposition] + _english_np(phrase), ["im"] + words[1:]
    return [preposition] + _english_np(phrase), [german] + words


def _realize_clause(clause):
    """English words and the German clause fields (topological fields)."""
    person = _person(clause.subject)
    en, de = [], []  # Objects, prepositional phrase, predicate.
    if clause.verb == "be":
        en_verb, finite = lex.TO_BE[person]
        en_verb, tail, cluster = [en_verb], [], [finite]
    else:
        verb = FRAMES[clause.frame][clause.verb]
        if clause.modal:
            modal = lex.MODAL_VERBS[clause.modal]
            en_verb = [modal.english(person), verb.en]
            finite = modal.german(person)
            tail, cluster = [verb.infinitive], [verb.infinitive, finite]
        else:
            en_verb, finite = [verb.english(person)], verb.german(person)
            tail = [verb.prefix] if verb.prefix else []
            cluster = [verb.prefix + finite]  # Rejoined when verb-final.
    if clause.indirect:
        en += _english_np(clause.indirect)
        de += _german_np(clause.indirect, "dat")
    if clause.obj:
        en += _english_np(clause.obj)
        de += _german_np(
            clause.obj, "dat" if clause.frame == "dative" else "acc"
        )
    if clause.prep:
        en_pp, de_pp = _prepositional_phrase(clause.prep)
        en, de = en + en_pp, de + de_pp
    if clause.predicate:
        en.append(clause.predicate)
        de.append(lex.ADJECTIVES[clause.predicate].de)
    if clause.age:
        en += [lex.english_number(clause.age), "years", "old"]
        de += [lex.german_number(clause.age), "Jahre", "alt"]
    return {
        "en_subject": _english_np(clause.subject),
        "en_rest": en_verb + en,
        "subject": _german_np(clause.subject, "nom"),
        "finite": [finite],
        "middle": de,
        "tail": tail,
        "cluster": cluster,
    }


def _main_clause(clause, front=(), front_time=False):
    """Verb-second: one constituent, the finite verb, the rest, the tail."""
    parts = _realize_clause(clause)
    time_en, time_de = clause.time or ("", "")
    time_en, time_de = time_en.split(), time_de.split()
    english = parts["en_subject"] + parts["en_rest"]
    if front_time:
        english, first = time_en + english, time_de
    else:
        english, first = english + time_en, list(front)
    if first:  # Inversion: the subject follows the finite verb.
        german = first + parts["finite"] + parts["subject"]
        german += [] if front_time else time_de
    else:
        german = parts["subject"] + parts["finite"] + time_de
    return english, german + parts["middle"] + parts["tail"]


def _sub_clause(clause):
    """Verb-final: subject, time, the rest, then the verb cluster."""
    parts = _realize_clause(clause)
    time_en, time_de = clause.time or ("", "")
    english = parts["en_subject"] + parts["en_rest"] + time_en.split()
    german = parts["subject"] + time_de.split() + parts["middle"]
    return english, german + parts["cluster"]


def _sentence_text(words):
    text = " ".join(words).replace(" ,", ",")
    return text[0].upper() + text[1:] + "."


def realize(sentence: Sentence) -> tuple[str, str]:
    """Says one `Sentence` in both languages.

    Args:
        sentence: the choices, sampled by `sample_sentence` or built by hand.

    Returns:
        The (English, German) pair, each capitalized and ending with ".".

    Raises:
        ValueError: if a pronoun is used outside the subject position.
    """
    if sentence.sub is None:
        english, german = _main_clause(
            sentence.main, front_time=sentence.front_time
        )
        return _sentence_text(english), _sentence_text(german)
    en_conj = sentence.conjunction
    de_conj = CONJUNCTIONS[en_conj]
    en_sub, de_sub = _sub_clause(sentence.sub)
    if sentence.sub_first:
        en_main, de_main = _main_clause(
            sentence.main, front=[de_conj] + de_sub + [","]
        )
        english = [en_conj] + en_sub + [","] + en_main
        return _sentence_text(english), _sentence_text(de_main)
    en_main, de_main = _main_clause(
        sentence.main, front_time=sentence.front_time
    )
    comma = [","] if en_conj == "because" else []
    english = en_main + comma + [en_conj] + en_sub
    german = de_main + [",", de_conj] + de_sub
    return _sentence_text(english), _sentence_text(german)


def _pick(rng, options):
    """A uniform choice; faster than `rng.choice` and just as deterministic."""
    return options[int(rng.random() * len(options))]


def _expand(weights):
    """A {key: integer weight} table as a tuple to `_pick` from."""
    return tuple(key for key, weight in weights.items() for _ in range(weight))


# (determiner, plural) of noun phrases; "poss" is a possessive.
_SUBJECT_DETERMINERS = _expand(
    {("the", 0): 40, ("a", 0): 20, ("poss", 0): 10, ("the", 1): 14}
    | {("poss", 1): 4, ("count", 1): 6, ("bare", 1): 6}
)
_OBJECT_DETERMINERS = _expand(
    {("the", 0): 30, ("a", 0): 20, ("poss", 0): 10, ("no", 0): 4}
    | {("the", 1): 10, ("poss", 1): 4, ("count", 1): 14, ("bare", 1): 5}
)
# No "kein" after prepositions or for dative objects: only "has no dog".
_OBLIQUE_DETERMINERS = tuple(d for d in _OBJECT_DETERMINERS if d[0] != "no")
_PLACE_DETERMINERS = ("the", "the", "the", "a", "my", "our")
_POSSESSIVES = ("my", "your", "his", "her", "our")
_FRAMES = _expand(
    {"transitive": 40, "intransitive": 16, "ditransitive": 10}
    | {"dative": 10, "copula": 9, "age": 5, "count": 8}
)
_SHAPES = _expand({"simple": 45, "that": 15, "after": 22, "first": 18})
_TIMES = _expand({"date": 7, "weekday": 5, "month": 2, "adverb": 6})
_PREPOSITIONS = {
    "intransitive": ("in", "in", "with", "without"),
    "transitive": ("in", "with", "for"),
}
_PREP_CHANCE = {"intransitive": 0.6, "transitive": 0.25}
# "would like to like", "must need": modals that read badly with these verbs.
_NO_MODAL = ("belong to", "like", "need")
# Only passing states go with a time: "on Monday the dog is tired".
_STATES = ("tired", "hungry")
_PERSON = frozenset({"person"})
_ANIMATE = frozenset({"person", "animal"})
_DESCRIBABLE = frozenset({"person", "animal", "thing"})
_VERBS = {frame: tuple(verbs.values()) for frame, verbs in FRAMES.items()}
_ADJECTIVES_OF = {
    noun.en: tuple(
        a.en for a in lex.ADJECTIVES.values() if a.kinds & noun.kinds
    )
    for noun in lex.NOUNS.values()
}
_PERSON_ADJECTIVES = tuple(
    a.en for a in lex.ADJECTIVES.values() if "person" in a.kinds
)
_PLACE_ADJECTIVES = tuple(
    a.en for a in lex.ADJECTIVES.values() if "place" in a.kinds
)


@functools.cache
def _nouns_of(kinds):
    return tuple(n for n in lex.NOUNS.values() if n.kinds & kinds)


def _sample_noun_phrase(rng, kinds, determiners, pronouns=0.0, avoid=""):
    """A noun phrase whose head has one of `kinds` and is not `avoid`."""
    if "person" in kinds:
        draw = rng.random()
        if draw < pronouns:
            return NounPhrase(_pick(rng, tuple(lex.PRONOUNS)), "")
        if draw < pronouns + 0.08:
            return NounPhrase(_pick(rng, lex.NAMES), "")
    noun = _pick(rng, _nouns_of(kinds))
    while noun.en == avoid:  # "The man sees the man" reads as two men.
        noun = _pick(rng, _nouns_of(kinds))
    determiner, plural = _pick(rng, determiners)
    if determiner == "poss":  # Not "his man": only kin and things.
        poss = "noposs" not in noun.kinds
        determiner = _pick(rng, _POSSESSIVES) if poss else "the"
    count = int(2 + rng.random() * 98) if determiner == "count" else None
    adjectives = _ADJECTIVES_OF[noun.en]
    adjective = None
    if adjectives and rng.random() < 0.3:
        adjective = _pick(rng, adjectives)
    return NounPhrase(noun.en, determiner, bool(plural), adjective, count)


def _sample_place(rng):
    noun = _pick(rng, _nouns_of(frozenset({"place"})))
    adjective = _pick(rng, _PLACE_ADJECTIVES) if rng.random() < 0.2 else None
    return NounPhrase(noun.en, _pick(rng, _PLACE_DETERMINERS), False, adjective)


def _sample_time(rng):
    """An (English, German) time adverbial: date, weekday, month or adverb."""
    kind = _pick(rng, _TIMES)
    if kind == "adverb":
        return _pick(rng, lex.TIME_ADVERBS)
    if kind == "weekday":
        en, de = _pick(rng, lex.WEEKDAYS)
        return f"on {en}", f"am {de}"
    en, de, days = _pick(rng, lex.MONTHS)
    if kind == "month":
        return f"in {en}", f"im {de}"
    day = int(1 + rng.random() * days)
    german = f"am {lex.german_ordinal(day, 'en')} {de}"
    if rng.random() < 0.3:
        return f"on {en} {day}", german
    return f"on the {lex.english_ordinal(day)} of {en}", german


def _sample_prep(rng, frame, verb, avoid):
    if verb.en == "live":  # "wohnen" needs a place.
        return "in", _sample_place(rng)
    if rng.random() >= _PREP_CHANCE.get(frame, 0.15):
        return None
    preposition = _pick(rng, _PREPOSITIONS.get(frame, ("in",)))
    if preposition == "in":
        return "in", _sample_place(rng)
    kinds = _PERSON if preposition == "for" else _ANIMATE
    return preposition, _sample_noun_phrase(
        rng, kinds, _OBLIQUE_DETERMINERS, avoid=avoid
    )


def _sample_clause(rng, time_chance):
    """A clause: verb, arguments, maybe a modal and a time adverbial."""
    frame = _pick(rng, _FRAMES)
    time = _sample_time(rng) if rng.random() < time_chance else None
    if frame in ("copula", "age"):
        kinds = _DESCRIBABLE if frame == "copula" else _ANIMATE
        subject = _sample_noun_phrase(rng, kinds, _SUBJECT_DETERMINERS, 0.25)
        if frame == "age":
            age = int(2 + rng.random() * 98)
            return Clause(subject, "be", "copula", age=age)
        options = _ADJECTIVES_OF.get(subject.head, _PERSON_ADJECTIVES)
        predicate = _pick(rng, options)
        while predicate == subject.adjective:  # Not "the big dog is big".
            predicate = _pick(rng, options)
        time = time if predicate in _STATES else None
        return Clause(subject, "be", "copula", predicate=predicate, time=time)
    if frame == "count":
        verb = lex.TRANSITIVE_VERBS["have"]
    else:
        verb = _pick(rng, _VERBS[frame])
    subject = _sample_noun_phrase(
        rng, verb.subject_kinds, _SUBJECT_DETERMINERS, 0.25
    )
    avoid = subject.head
    modal = None
    if verb.en not in _NO_MODAL and rng.random() < 0.25:
        modal = _pick(rng, tuple(lex.MODAL_VERBS))
    obj = indirect = None
    if frame == "ditransitive":
        indirect = _sample_noun_phrase(
            rng, verb.indirect_kinds, _OBLIQUE_DETERMINERS, avoid=avoid
        )
    if frame != "intransitive":
        determiners = _OBJECT_DETERMINERS
        if frame == "dative":
            determiners = _OBLIQUE_DETERMINERS
        obj = _sample_noun_phrase(
            rng, verb.object_kinds, determiners, avoid=avoid
        )
    if frame == "count":
        count = int(2 + rng.random() * 98)
        obj = dataclasses.replace(
            obj, determiner="count", plural=True, count=count
        )
        return Clause(subject, "have", "transitive", obj=obj)
    prep = _sample_prep(rng, frame, verb, avoid)
    return Clause(
        subject, verb.en, frame, obj, indirect, modal, prep, time=time
    )


def sample_sentence(rng: random.Random) -> Sentence:
    """Samples one `Sentence` from the grammar.

    Args:
        rng: the random generator; it alone decides the choices.

    Returns:
        A simple clause (maybe with a fronted time), a reported "that"
        clause, or a main clause with a "because/if/when" clause before or
        after it.
    """
    shape = _pick(rng, _SHAPES)
    if shape == "simple":
        main = _sample_clause(rng, time_chance=0.45)
        return Sentence(main, front_time=bool(main.time) and rng.random() < 0.6)
    sub = _sample_clause(rng, time_chance=0.15)
    if shape == "that":
        subject = _sample_noun_phrase(rng, _PERSON, _SUBJECT_DETERMINERS, 0.25)
        verb = _pick(rng, tuple(lex.REPORTING_VERBS))
        return Sentence(Clause(subject, verb, "reporting"), "that", sub)
    main = _sample_clause(rng, time_chance=0.15)
    conjunction = _pick(rng, ("because", "if", "when"))
    if shape == "first":
        return Sentence(main, conjunction, sub, sub_first=True)
    front_time = bool(main.time) and rng.random() < 0.5
    return Sentence(main, conjunction, sub, front_time=front_time)


def _check_count(name, value, minimum=0):
    if not is_integer(value) or value < minimum:
        raise ValueError(
            f"`{name}` must be an integer >= {minimum}. "
            f"Received: {name}={value!r}"
        )


def generate_pairs(num_pairs: int, seed: int = 0) -> list[tuple[str, str]]:
    """Generates distinct (English, German) sentence pairs, deterministically.

    Sentences are sampled from the grammar with `random.Random(seed)`; a
    sample is redrawn when its English side was already generated or when
    either side has fewer than `MIN_WORDS` or more than `MAX_WORDS` words.
    The output for `num_pairs=n` is a prefix of the output for any larger
    `num_pairs` with the same seed.

    Args:
        num_pairs: number of pairs, an integer >= 0.
        seed: seed of the generator; the same seed gives the same pairs.

    Returns:
        A list of `num_pairs` (English, German) tuples with distinct English
        sides.

    Raises:
        ValueError: if `num_pairs` is not a non-negative integer, or is larger
            than the grammar can make distinct sentences for.
    """
    _check_count("num_pairs", num_pairs)
    rng = random.Random(seed)
    pairs, seen = [], set()
    for _ in range(20 * num_pairs + 1000):
        if len(pairs) == num_pairs:
            return pairs
        english, german = realize(sample_sentence(rng))
        lengths = (len(english.split()), len(german.split()))
        if english in seen or not min(lengths) >= MIN_WORDS:
            continue
        if max(lengths) > MAX_WORDS:
            continue
        seen.add(english)
        pairs.append((english, german))
    raise ValueError(
        f"The demo grammar made only {len(pairs)} distinct sentences; ask "
        f"for fewer pairs. Received: num_pairs={num_pairs}"
    )


def demo_splits(
    num_train: int = 40000,
    num_dev: int = 500,
    num_test: int = 500,
    seed: int = 0,
) -> dict[str, list[tuple[str, str]]]:
    """Train, dev and test splits of the demo corpus, disjoint in English.

    The pairs are cut from one `generate_pairs` stream, test first, then dev,
    then train, so the test and dev sets stay the same when only `num_train`
    changes, and no English sentence is in two splits.

    Args:
        num_train: number of training pairs, an integer >= 1.
        num_dev: number of development pairs, an integer >= 0.
        num_test: number of test pairs, an integer >= 0.
        seed: seed of the generator.

    Returns:
        A dict with keys "train", "dev", "test" of (English, German) lists.

    Raises:
        ValueError: if a count is not an integer in its range.
    """
    _check_count("num_train", num_train, minimum=1)
    _check_count("num_dev", num_dev)
    _check_count("num_test", num_test)
    pairs = generate_pairs(num_test + num_dev + num_train, seed)
    return {
        "train": pairs[num_test + num_dev :],
        "dev": pairs[num_test : num_test + num_dev],
        "test": pairs[:num_test],
    }


def write_demo_corpus(
    directory: str, **demo_splits_kwargs
) -> dict[str, tuple[str, str]]:
    """Writes the demo splits as parallel text files, PREFIX.LANG style.

    Args:
        directory: output directory, created if missing.
        **demo_splits_kwargs: arguments of `demo_splits`.

    Returns:
        A dict split -> (English path, German path) of `train.en`,
        `train.de`, `dev.en`, `dev.de`, `test.en`, `test.de` (UTF-8, one
        sentence a line).
    """
    os.makedirs(directory, exist_ok=True)
    paths = {}
    for split, pairs in demo_splits(**demo_splits_kwargs).items():
        paths[split] = tuple(
            os.path.join(directory, f"{split}.{lang}")
            for lang in (SOURCE_LANG, TARGET_LANG)
        )
        for side, path in enumerate(paths[split]):
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.writelines(pair[side] + "\n" for pair in pairs)
    return paths
