"""Shared data-test fixtures: English-German pairs, a tokenizer, temp dirs."""

import functools
import os
import shutil
import tempfile

from keras_transformer.data import tokenizer as tokenizer_lib

PAIRS = (
    ("The cat sleeps on the sofa.", "Die Katze schläft auf dem Sofa."),
    ("I like green tea.", "Ich mag grünen Tee."),
    ("Where is the train station?", "Wo ist der Bahnhof?"),
    ("We are going home now.", "Wir gehen jetzt nach Hause."),
    ("The weather is nice today.", "Das Wetter ist heute schön."),
    ("My brother reads a book.", "Mein Bruder liest ein Buch."),
    ("She works in a big city.", "Sie arbeitet in einer großen Stadt."),
    ("The children play in the garden.", "Die Kinder spielen im Garten."),
    ("Can you help me, please?", "Kannst du mir bitte helfen?"),
    ("The shop opens at nine o'clock.", "Der Laden öffnet um neun Uhr."),
    ("He drinks coffee every morning.", "Er trinkt jeden Morgen Kaffee."),
    ("The river flows to the sea.", "Der Fluss fließt ins Meer."),
    ("Our teacher is very friendly.", "Unsere Lehrerin ist sehr freundlich."),
    ("They bought a new car.", "Sie haben ein neues Auto gekauft."),
    ("The dog barks at the postman.", "Der Hund bellt den Briefträger an."),
    ("I have two sisters.", "Ich habe zwei Schwestern."),
    (
        "The museum is closed on Monday.",
        "Das Museum ist am Montag geschlossen.",
    ),
    ("Please close the window.", "Bitte schließ das Fenster."),
    ("The soup is too hot.", "Die Suppe ist zu heiß."),
    ("We meet at the old bridge.", "Wir treffen uns an der alten Brücke."),
    ("Music makes people happy.", "Musik macht Menschen glücklich."),
    ("The train is late again.", "Der Zug hat wieder Verspätung."),
    ("Her garden has many flowers.", "Ihr Garten hat viele Blumen."),
    ("I learn German at school.", "Ich lerne Deutsch in der Schule."),
)
VOCAB_SIZE = 320


def sentences():
    """Both sides of `PAIRS`, as the shared vocabulary is trained."""
    return [source for source, _ in PAIRS] + [target for _, target in PAIRS]


@functools.cache
def model_path():
    """A BPE model trained once per test process on `PAIRS`."""
    prefix = os.path.join(tempfile.mkdtemp(), "sample")
    return tokenizer_lib.train_subword_vocab(sentences(), VOCAB_SIZE, prefix)


def tokenizer():
    return tokenizer_lib.SubwordTokenizer.from_file(model_path())


def tempdir(test):
    """A fresh directory removed after `test` (absl's needs parsed flags)."""
    path = tempfile.mkdtemp()
    test.addCleanup(shutil.rmtree, path, ignore_errors=True)
    return path


def write(path, content):
    """Writes str (UTF-8) or bytes to `path` and returns the path."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    with open(path, "wb") as f:
        f.write(data)
    return path
