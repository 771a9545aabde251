"""The words of the demo corpus and their German inflection, hand-checked."""

import dataclasses

from keras_transformer.checks import is_integer

# Cases are "nom", "acc", "dat"; persons are "1sg", "2sg", "3sg", "1pl",
# "3pl" (the plural forms of every verb used here are the same in 1pl/3pl).
CASES = ("nom", "acc", "dat")


@dataclasses.dataclass(frozen=True)
class Noun:
    """A noun with its English and German singular and plural forms."""

    en: str
    en_plural: str
    de: str
    de_plural: str
    gender: str  # "m", "f" or "n".
    weak: bool  # n-declension (der Junge, den Jungen): oblique sg = plural.
    kinds: frozenset

    def german(self, plural: bool, case: str) -> str:
        """The German form in a number and case (dative plural adds -n)."""
        if plural:
            if case == "dat" and self.de_plural[-1] not in "ns":
                return self.de_plural + "n"
            return self.de_plural
        return self.de_plural if self.weak and case != "nom" else self.de


@dataclasses.dataclass(frozen=True)
class Adjective:
    """An adjective: German predicative form and stem for endings."""

    en: str
    de: str
    stem: str  # teuer -> teur-e, müde -> müd-e.
    kinds: frozenset


@dataclasses.dataclass(frozen=True)
class Verb:
    """A verb in one argument frame, with present-tense forms.

    German `forms` are the 1sg, 2sg, 3sg finite forms without the separable
    `prefix`; `de` is the infinitive without the prefix, also the 1pl/3pl.
    """

    en: str
    en_3sg: str
    de: str
    forms: tuple
    prefix: str
    subject_kinds: frozenset
    object_kinds: frozenset
    indirect_kinds: frozenset

    def english(self, person: str) -> str:
        return self.en_3sg if person == "3sg" else self.en

    def german(self, person: str) -> str:
        """The finite German form, without the separable prefix."""
        index = ("1sg", "2sg", "3sg").index(person) if "sg" in person else -1
        return self.forms[index] if index >= 0 else self.de

    @property
    def infinitive(self) -> str:
        return self.prefix + self.de


def _kinds(text):
    return frozenset(text.split(",")) if text and text != "-" else frozenset()


def _words(text):
    return tuple(text.split())


def _parse_nouns(table):
    nouns = {}
    for line in table.strip().splitlines():
        en, en_pl, de, de_pl, gender, kinds = line.split()
        nouns[en] = Noun(
            en, en_pl, de, de_pl, gender[0], gender == "mw", _kinds(kinds)
        )
    return nouns


def _parse_adjectives(table):
    adjectives = {}
    for line in table.strip().splitlines():
        en, de, stem, kinds = line.split()
        adjectives[en] = Adjective(en, de, stem, _kinds(kinds))
    return adjectives


def _parse_verbs(table):
    verbs = {}
    for line in table.strip().splitlines():
        fields = [field.strip() for field in line.split("|")]
        en, en_3sg, infinitive, first, second, third = fields[:6]
        kinds = [_kinds(text) for text in fields[6:]] + [frozenset()] * 3
        prefix, _, de = infinitive.rpartition("+")
        verbs[en] = Verb(
            en, en_3sg, de, (first, second, third), prefix, *kinds[:3]
        )
    return verbs


# English sg, English pl, German sg, German pl, gender (mw: masculine of
# the n-declension), semantic kinds (used only to pick sensible sentences).
NOUNS = _parse_nouns("""
man men Mann Männer m person,noposs
woman women Frau Frauen f person,noposs
child children Kind Kinder n person
girl girls Mädchen Mädchen n person,noposs
boy boys Junge Jungen mw person,noposs
teacher teachers Lehrer Lehrer m person
doctor doctors Arzt Ärzte m person
father fathers Vater Väter m person
mother mothers Mutter Mütter f person
brother brothers Bruder Brüder m person
sister sisters Schwester Schwestern f person
friend friends Freund Freunde m person
baker bakers Bäcker Bäcker m person
king kings König Könige m person,noposs
queen queens Königin Königinnen f person,noposs
son sons Sohn Söhne m person
daughter daughters Tochter Töchter f person
dog dogs Hund Hunde m animal
cat cats Katze Katzen f animal
horse horses Pferd Pferde n animal
bird birds Vogel Vögel m animal
mouse mice Maus Mäuse f animal
cow cows Kuh Kühe f animal
monkey monkeys Affe Affen mw animal
pig pigs Schwein Schweine n animal
duck ducks Ente Enten f animal
book books Buch Bücher n thing,readable,openable,writable
letter letters Brief Briefe m thing,readable,openable,writable
newspaper newspapers Zeitung Zeitungen f thing,readable
car cars Auto Autos n thing,vehicle
bicycle bicycles Fahrrad Fahrräder n thing,vehicle
boat boats Boot Boote n thing,vehicle
key keys Schlüssel Schlüssel m thing
ball balls Ball Bälle m thing
table tables Tisch Tische m thing
chair chairs Stuhl Stühle m thing
lamp lamps Lampe Lampen f thing
bag bags Tasche Taschen f thing,openable
bottle bottles Flasche Flaschen f thing,openable
door doors Tür Türen f openable
window windows Fenster Fenster n openable
picture pictures Bild Bilder n thing
clock clocks Uhr Uhren f thing
hat hats Hut Hüte m thing
jacket jackets Jacke Jacken f thing
cup cups Tasse Tassen f thing
umbrella umbrellas Regenschirm Regenschirme m thing
gift gifts Geschenk Geschenke n thing,openable
song songs Lied Lieder n song,writable
apple apples Apfel Äpfel m food
cake cakes Kuchen Kuchen m food
egg eggs Ei Eier n food
banana bananas Banane Bananen f food
sausage sausages Wurst Würste f food
garden gardens Garten Gärten m place
park parks Park Parks m place
forest forests Wald Wälder m place
city cities Stadt Städte f place
school schools Schule Schulen f place
kitchen kitchens Küche Küchen f place
house houses Haus Häuser n place,building
village villages Dorf Dörfer n place
room rooms Zimmer Zimmer n place
""")

# English, German predicative form, German stem, kinds it describes.
ADJECTIVES = _parse_adjectives("""
big groß groß person,animal,thing,food,place
small klein klein person,animal,thing,food,place
old alt alt person,animal,thing,place
young jung jung person,animal
new neu neu thing,vehicle
red rot rot thing,food,vehicle
green grün grün thing,food,vehicle
blue blau blau thing,vehicle
black schwarz schwarz animal,thing,vehicle
white weiß weiß animal,thing,vehicle
beautiful schön schön person,animal,thing,place,song
tired müde müd person,animal
hungry hungrig hungrig person,animal
friendly freundlich freundlich person,animal
clever klug klug person,animal
expensive teuer teur thing,vehicle
cheap billig billig thing,vehicle
heavy schwer schwer thing
fast schnell schnell animal,vehicle
""")

# English base | 3sg | German infinitive (prefix+stem) | ich | du | er |
# subject kinds | object kinds [| indirect (dative) object kinds].
_ANIMATE = "person,animal"
TRANSITIVE_VERBS = _parse_verbs(f"""
see | sees | sehen | sehe | siehst | sieht | {_ANIMATE} | \
{_ANIMATE},thing,vehicle,food,place
buy | buys | kaufen | kaufe | kaufst | kauft | person | \
animal,thing,food,building
sell | sells | verkaufen | verkaufe | verkaufst | verkauft | person | \
animal,thing,building
read | reads | lesen | lese | liest | liest | person | readable
write | writes | schreiben | schreibe | schreibst | schreibt | person | \
writable
have | has | haben | habe | hast | hat | person | animal,thing,food
find | finds | finden | finde | findest | findet | {_ANIMATE} | \
animal,thing,food
look for | looks for | suchen | suche | suchst | sucht | {_ANIMATE} | \
{_ANIMATE},thing,food
need | needs | brauchen | brauche | brauchst | braucht | person | \
thing,food
like | likes | mögen | mag | magst | mag | {_ANIMATE} | \
{_ANIMATE},thing,food,place,song
eat | eats | essen | esse | isst | isst | person | food
carry | carries | tragen | trage | trägst | trägt | person | \
animal,thing,food
open | opens | öffnen | öffne | öffnest | öffnet | person | openable
paint | paints | malen | male | malst | malt | person | \
{_ANIMATE},thing,place
visit | visits | besuchen | besuche | besuchst | besucht | person | \
person,place
know | knows | kennen | kenne | kennst | kennt | {_ANIMATE} | \
{_ANIMATE},place,song
love | loves | lieben | liebe | liebst | liebt | person | {_ANIMATE}
hear | hears | hören | höre | hörst | hört | {_ANIMATE} | {_ANIMATE},song
wash | washes | waschen | wasche | wäschst | wäscht | person | \
{_ANIMATE},thing
catch | catches | fangen | fange | fängst | fängt | {_ANIMATE} | animal
call | calls | an+rufen | rufe | rufst | ruft | person | person
invite | invites | ein+laden | lade | lädst | lädt | person | person
pick up | picks up | ab+holen | hole | holst | holt | person | \
{_ANIMATE},thing
""")

# Dative object ("indirect") before the accusative one: gibt der Frau ein Buch.
DITRANSITIVE_VERBS = _parse_verbs("""
give | gives | geben | gebe | gibst | gibt | person | thing,food | person
show | shows | zeigen | zeige | zeigst | zeigt | person | animal,thing | person
bring | brings | bringen | bringe | bringst | bringt | person | thing,food | \
person
send | sends | schicken | schicke | schickst | schickt | person | thing | person
""")

# Verbs whose only object is in the dative: hilft dem Mann.
DATIVE_VERBS = _parse_verbs(f"""
help | helps | helfen | helfe | hilfst | hilft | person | {_ANIMATE}
thank | thanks | danken | danke | dankst | dankt | person | person
follow | follows | folgen | folge | folgst | folgt | {_ANIMATE} | {_ANIMATE}
answer | answers | antworten | antworte | antwortest | antwortet | person | \
person
belong to | belongs to | gehören | gehöre | gehörst | gehört | \
animal,thing | person
""")

INTRANSITIVE_VERBS = _parse_verbs(f"""
sleep | sleeps | schlafen | schlafe | schläfst | schläft | {_ANIMATE}
laugh | laughs | lachen | lache | lachst | lacht | person
work | works | arbeiten | arbeite | arbeitest | arbeitet | person
sing | sings | singen | singe | singst | singt | person
dance | dances | tanzen | tanze | tanzt | tanzt | person
swim | swims | schwimmen | schwimme | schwimmst | schwimmt | {_ANIMATE}
run | runs | laufen | laufe | läufst | läuft | {_ANIMATE}
wait | waits | warten | warte | wartest | wartet | {_ANIMATE}
play | plays | spielen | spiele | spielst | spielt | {_ANIMATE}
cook | cooks | kochen | koche | kochst | kocht | person
live | lives | wohnen | wohne | wohnst | wohnt | person
""")

# Verbs of saying and thinking that take a "dass" clause.
REPORTING_VERBS = _parse_verbs("""
say | says | sagen | sage | sagst | sagt | person
believe | believes | glauben | glaube | glaubst | glaubt | person
know | knows | wissen | weiß | weißt | weiß | person
hope | hopes | hoffen | hoffe | hoffst | hofft | person
think | thinks | denken | denke | denkst | denkt | person
""")

# Modal verbs: the main verb goes to the end as an infinitive.
MODAL_VERBS = _parse_verbs("""
want to | wants to | wollen | will | willst | will
can | can | können | kann | kannst | kann
must | must | müssen | muss | musst | muss
would like to | would like to | möchten | möchte | möchtest | möchte
""")

# The copula: English and German forms by person.
TO_BE = {
    "1sg": ("am", "bin"),
    "2sg": ("are", "bist"),
    "3sg": ("is", "ist"),
    "1pl": ("are", "sind"),
    "3pl": ("are", "sind"),
}

# English pronoun -> (German pronoun, person). "you" is always "du".
PRONOUNS = {
    "I": ("ich", "1sg"),
    "you": ("du", "2sg"),
    "he": ("er", "3sg"),
    "she": ("sie", "3sg"),
    "we": ("wir", "1pl"),
    "they": ("sie", "3pl"),
}

NAMES = ("Anna", "Maria", "Lisa", "Julia", "Peter", "Thomas", "Paul", "Max")

# Time expressions: (English, German); dates and weekdays are built below.
MONTHS = (
    ("January", "Januar", 31),
    ("February", "Februar", 28),
    ("March", "März", 31),
    ("April", "April", 30),
    ("May", "Mai", 31),
    ("June", "Juni", 30),
    ("July", "Juli", 31),
    ("August", "August", 31),
    ("September", "September", 30),
    ("October", "Oktober", 31),
    ("November", "November", 30),
    ("December", "Dezember", 31),
)
WEEKDAYS = (
    ("Monday", "Montag"),
    ("Tuesday", "Dienstag"),
    ("Wednesday", "Mittwoch"),
    ("Thursday", "Donnerstag"),
    ("Friday", "Freitag"),
    ("Saturday", "Samstag"),
    ("Sunday", "Sonntag"),
)
TIME_ADVERBS = (
    ("today", "heute"),
    ("tomorrow", "morgen"),
    ("every day", "jeden Tag"),
    ("in the morning", "am Morgen"),
    ("in the evening", "am Abend"),
    ("at night", "in der Nacht"),
)

_EN_UNITS = _words(
    "one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
)
_EN_TENS = _words("twenty thirty forty fifty sixty seventy eighty ninety")
_EN_ORDINALS = _words(
    "first second third fourth fifth sixth seventh eighth ninth tenth "
    "eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth "
    "eighteenth nineteenth"
)
_DE_UNITS = _words(
    "eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn "
    "vierzehn fünfzehn sechzehn siebzehn achtzehn neunzehn"
)
_DE_TENS = _words(
    "zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig neunzig"
)
_DE_ORDINALS = _words(
    "erste zweite dritte vierte fünfte sechste siebte achte neunte zehnte "
    "elfte zwölfte dreizehnte vierzehnte fünfzehnte sechzehnte siebzehnte "
    "achtzehnte neunzehnte"
)


def _split_number(n):
    if not is_integer(n) or not 1 <= n <= 99:
        raise ValueError(
            "Number words are defined for the integers 1 to 99; pass an "
            f"integer in that range. Received: n={n!r}"
        )
    return divmod(n, 10)


def english_number(n: int) -> str:
    """English cardinal of 1..99: 7 -> "seven", 21 -> "twenty-one"."""
    tens, unit = _split_number(n)
    if n < 20:
        return _EN_UNITS[n - 1]
    return _EN_TENS[tens - 2] + (f"-{_EN_UNITS[unit - 1]}" if unit else "")


def german_number(n: int) -> str:
    """German cardinal of 1..99, units before tens in one word.

    1 -> "eins", 16 -> "sechzehn", 21 -> "einundzwanzig", 37 ->
    "siebenunddreißig".
    """
    tens, unit = _split_number(n)
    if n < 20:
        return _DE_UNITS[n - 1]
    if not unit:
        return _DE_TENS[tens - 2]
    # "eins" loses its -s inside a compound: einundzwanzig.
    units = "ein" if unit == 1 else _DE_UNITS[unit - 1]
    return f"{units}und{_DE_TENS[tens - 2]}"


def english_ordinal(n: int) -> str:
    """English ordinal of 1..99: 3 -> "third", 21 -> "twenty-first"."""
    tens, unit = _split_number(n)
    if n < 20:
        return _EN_ORDINALS[n - 1]
    if not unit:
        return _EN_TENS[tens - 2][:-1] + "ieth"  # twenty -> twentieth.
    return f"{_EN_TENS[tens - 2]}-{_EN_ORDINALS[unit - 1]}"


def german_ordinal(n: int, ending: str = "e") -> str:
    """German ordinal of 1..99 with an adjective ending.

    -t- up to 19 and -st- from 20: "dritte", "siebte", "zwanzigste",
    "einundzwanzigste"; `ending="en"` gives the dative of "am dritten Mai".
    """
    _split_number(n)
    if n < 20:
        return _DE_ORDINALS[n - 1][:-1] + ending
    return german_number(n) + "st" + ending


# German noun-phrase inflection, indexed by gender ("m", "f", "n") or "pl",
# then by case in CASES order (nominative, accusative, dative).
_DEFINITE_ARTICLES = {
    "m": ("der", "den", "dem"),
    "f": ("die", "die", "der"),
    "n": ("das", "das", "dem"),
    "pl": ("die", "die", "den"),
}
_EIN_WORD_ENDINGS = {
    "m": ("", "en", "em"),
    "f": ("e", "e", "er"),
    "n": ("", "", "em"),
    "pl": ("e", "e", "en"),
}
# Adjective endings: weak after der/die/das, mixed after ein-words
# (ein, kein, mein, ...), strong with no article (plural only here).
_WEAK_ENDINGS = {
    "m": ("e", "en", "en"),
    "f": ("e", "e", "en"),
    "n": ("e", "e", "en"),
    "pl": ("en", "en", "en"),
}
_MIXED_ENDINGS = {
    "m": ("er", "en", "en"),
    "f": ("e", "e", "en"),
    "n": ("es", "es", "en"),
    "pl": ("en", "en", "en"),
}
_STRONG_PLURAL_ENDINGS = ("e", "e", "en")

# English determiner -> German ein-word stem ("a" is singular only).
EIN_WORDS = {
    "a": "ein",
    "no": "kein",
    "my": "mein",
    "your": "dein",
    "his": "sein",
    "her": "ihr",
    "our": "unser",
}


def english_noun_phrase(noun, determiner, plural, adjective, count):
    """English words of a noun phrase; determiner "count" uses `count`."""
    words = [adjective.en] if adjective else []
    words.append(noun.en_plural if plural else noun.en)
    if determiner == "a":
        return ["an" if words[0][0] in "aeiou" else "a"] + words
    if determiner == "count":
        return [english_number(count)] + words
    return words if determiner == "bare" else [determiner] + words


def german_noun_phrase(noun, determiner, plural, adjective, count, case):
    """German words of a noun phrase, inflected for gender, number, case."""
    slot = "pl" if plural else noun.gender
    index = CASES.index(case)
    if determiner == "the":
        words = [_DEFINITE_ARTICLES[slot][index]]
        ending = _WEAK_ENDINGS[slot][index]
    elif determiner in EIN_WORDS:
        words = [EIN_WORDS[determiner] + _EIN_WORD_ENDINGS[slot][index]]
        ending = _MIXED_ENDINGS[slot][index]
    else:  # "count" or "bare": plural without article, strong endings.
        words = [german_number(count)] if determiner == "count" else []
        ending = _STRONG_PLURAL_ENDINGS[index]
    if adjective:
        words.append(adjective.stem + ending)
    words.append(noun.german(plural, case))
    return words
