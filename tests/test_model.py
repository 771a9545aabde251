import json
import os
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from keras_transformer import Transformer, TransformerConfig, build_transformer
from keras_transformer import config as config_lib
from keras_transformer.decoding.translator import Translator
from keras_transformer.tokens import BOS_ID, EOS_ID
from keras_transformer.training import (
    LabelSmoothedCrossEntropy,
    MaskedTokenAccuracy,
    transformer_optimizer,
)
from tests.data import fixtures
from tests.test_case import TestCase

# Logits of a full pass and of incremental decoding agree to within these.
_TOLERANCES = {"float32": 1e-4, "mixed_float16": 1e-2, "mixed_bfloat16": 5e-2}


def closed_form_parameter_count(config):
    """The architecture's parameter count, written out from the paper."""
    d, f, n = config.d_model, config.d_ff, config.num_layers
    dk = config.num_heads * config.head_key_dim
    dv = config.num_heads * config.head_value_dim
    # W^Q, W^K (d x h*d_k), W^V (d x h*d_v), W^O (h*d_v x d) (section 3.2.2),
    # and with `attention_bias` their biases.
    attention = 2 * d * dk + d * dv + dv * d
    if config.attention_bias:
        attention += 2 * dk + dv + d
    feed_forward = d * f + f + f * d + d  # Eq. 2
    layer_norm = 2 * d  # gain and bias
    encoder_layer = attention + feed_forward + 2 * layer_norm
    decoder_layer = 2 * attention + feed_forward + 3 * layer_norm
    total = n * (encoder_layer + decoder_layer)
    source_vocab = config.input_vocab_size
    total += {
        "all": config.vocab_size * d,
        "target": (source_vocab + config.vocab_size) * d,
        "none": (source_vocab + 2 * config.vocab_size) * d,
    }[config.share_embeddings]
    if config.positional == "learned":
        total += 2 * config.max_length * d
    if config.norm_position == "pre":
        total += 2 * layer_norm
    return total


def built_parameter_count(config):
    """`count_params` of the model `config` builds, whose variables are
    never initialized: counting needs only their shapes (random weights of
    the big preset took seconds and 0.9 GB)."""
    with keras.StatelessScope(initialize_variables=False):
        count = build_transformer(config).count_params()
    # Forgets the variables left to initialize (a later scope's exit would
    # initialize them); no garbage collection, which takes a second or more
    # in a process that has run many tests.
    keras.backend.clear_session(free_memory=False)
    return count


def tiny_config(**overrides):
    return TransformerConfig.preset(
        "tiny",
        **{
            **dict(vocab_size=40, d_model=32, d_ff=64, num_heads=4),
            **overrides,
        },
    )


class TransformerModelTest(TestCase):
    def call(self, model, source, target):
        return model(
            {"source_ids": source, "target_ids": target}, training=False
        ).numpy()

    def test_is_functional_with_named_inputs_and_float32_logits(self):
        model = build_transformer(tiny_config())
        # A functional model: Keras built it from its inputs and outputs.
        self.assertIn("Functional", [c.__name__ for c in type(model).__mro__])
        self.assertIn("encoder", [layer.name for layer in model.layers])
        self.assertEqual(
            sorted(model.input.keys()), ["source_ids", "target_ids"]
        )
        source = self.random_ids((2, 7), 40)
        target = self.random_ids((2, 5), 40, seed=1)
        logits = model({"source_ids": source, "target_ids": target})
        self.assertEqual(tuple(logits.shape), (2, 5, 40))
        self.assertEqual(logits.dtype, "float32")

    def test_source_padding_changes_no_real_output(self):
        model = build_transformer(tiny_config())
        source = self.random_ids((2, 6), 40)
        target = self.random_ids((2, 5), 40, seed=1)
        padded = np.concatenate([source, np.zeros((2, 4), "int32")], axis=1)
        self.assertAllClose(
            self.call(model, source, target),
            self.call(model, padded, target),
            atol=1e-5,
        )

    def test_target_padding_changes_no_real_position(self):
        model = build_transformer(tiny_config())
        source = self.random_ids((2, 6), 40)
        target = self.random_ids((2, 5), 40, seed=1)
        padded = np.concatenate([target, np.zeros((2, 3), "int32")], axis=1)
        self.assertAllClose(
            self.call(model, source, target),
            self.call(model, source, padded)[:, :5],
            atol=1e-5,
        )

    def test_later_target_tokens_change_no_earlier_logit(self):
        model = build_transformer(tiny_config())
        source = self.random_ids((2, 6), 40)
        target = self.random_ids((2, 6), 40, seed=1)
        changed = target.copy()
        changed[:, 3:] = self.random_ids((2, 3), 40, seed=2)
        before = self.call(model, source, target)
        after = self.call(model, source, changed)
        self.assertAllClose(before[:, :3], after[:, :3], atol=1e-5)
        self.assertNotAllClose(before[:, 3:], after[:, 3:])

    def assert_incremental_decoding_equals_full_pass(self, model, atol):
        source = self.random_ids((3, 7), 30)
        source[0, 4:] = 0
        target = self.random_ids((3, 6), 40, seed=1)
        full = self.call(model, source, target)
        memory, memory_mask = model.encode(source)
        # Fixed-size, growing, then in-place caches (one hypothesis per
        # sentence: never reordered).
        for max_length, beam_size in ((6, None), (None, None), (6, 1)):
            self_cache, constants = model.initial_decoding_state(
                memory, max_length, beam_size=beam_size
            )
            for projected in tf.nest.flatten(constants["cross_attention"]):
                self.assertEqual(projected.dtype, model.decoder.compute_dtype)
            steps = []
            for t in range(6):
                logits, self_cache = model.decode_step(
                    target[:, t],
                    # An int64 step (as NumPy and tf.data give) for the
                    # caches written at it.
                    tf.constant(t, "int64") if max_length else t,
                    self_cache,
                    constants,
                    memory_mask,
                    append_to_cache=max_length is None,
                )
                steps.append(logits.numpy())
            self.assertAllClose(np.stack(steps, axis=1), full, atol=atol)

    def test_incremental_decoding_equals_full_forward_pass(self):
        for overrides in (
            {},  # no attention biases: the paper's, the default
            dict(attention_bias=True),
            dict(positional="learned", norm_position="pre"),
            dict(share_embeddings="none", source_vocab_size=30),
            # Rows of 2 KiB: every decoder kernel padded at decoding steps.
            dict(d_model=512, d_ff=512),
        ):
            model = build_transformer(tiny_config(**overrides))
            self.assert_incremental_decoding_equals_full_pass(
                model, _TOLERANCES["float32"]
            )

    def test_decoding_past_a_learned_position_table_is_refused_up_front(self):
        # Under XLA a step past the table read its last row, silently.
        model = build_transformer(
            tiny_config(positional="learned", max_length=6)
        )
        memory, _ = model.encode(tf.constant([[5, 6, 7, EOS_ID]]))
        model.initial_decoding_state(memory, max_length=6)
        for max_length in (7, tf.constant(7)):
            with self.assertRaisesRegex(
                ValueError,
                "`max_length` 7 exceeds the model's learned position",
            ):
                model.initial_decoding_state(memory, max_length=max_length)

    @parameterized.parameters("mixed_float16", "mixed_bfloat16")
    def test_incremental_decoding_under_mixed_precision(self, policy):
        # The encoder keys/values and the step weights are computed outside
        # the layers' `__call__` (no autocast): in the compute dtype too.
        for overrides in (
            {},
            dict(share_embeddings="none", source_vocab_size=30),
        ):
            model = build_transformer(tiny_config(**overrides), dtype=policy)
            self.assert_incremental_decoding_equals_full_pass(
                model, _TOLERANCES[policy]
            )

    def test_translator_over_a_mixed_float16_model(self):
        # `train.py --mixed_precision=mixed_float16` translates its dev set.
        config = tiny_config(
            vocab_size=fixtures.VOCAB_SIZE, num_layers=1, max_length=12
        )
        model = build_transformer(config, dtype="mixed_float16")
        translator = Translator(
            model, fixtures.tokenizer(), beam_size=2, alpha=0.0, length_offset=4
        )
        outputs = translator.translate(tf.constant(["I like green tea."]))
        self.assertEqual(outputs["outputs"].shape, (1,))
        # With alpha 0 a hypothesis's score is its log-probability, which a
        # full forward pass gives too.
        source = np.array([[5, 9, 17, EOS_ID]], "int32")
        result = translator.translate_ids(tf.constant(source))
        length = int(result["lengths"][0])
        output = result["output_ids"][0, :length].numpy()
        target = np.array([[BOS_ID, *output[:-1]]], "int32")
        logits = self.call(model, source, target)[0]
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        self.assertAllClose(
            float(result["scores"][0]),
            log_probs[np.arange(length), output].sum(),
            atol=length * _TOLERANCES["mixed_float16"],
        )

    @parameterized.parameters(False, True)
    def test_keras_file_round_trip_gives_identical_outputs(
        self, attention_bias
    ):
        model = build_transformer(
            tiny_config(positional="learned", attention_bias=attention_bias)
        )
        source = self.random_ids((2, 6), 40)
        target = self.random_ids((2, 5), 40, seed=1)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        restored = keras.saving.load_model(path)
        self.assertIsInstance(restored, Transformer)
        self.assertEqual(restored.config, model.config)
        self.assertAllEqual(
            self.call(model, source, target),
            self.call(restored, source, target),
        )

    def test_keras_file_saved_before_attention_bias_loads_with_the_biases(self):
        # Models saved before the switch existed had attention biases, and
        # their config has no `attention_bias`.
        model = build_transformer(tiny_config(attention_bias=True))
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        old_path = os.path.join(self.get_temp_dir(), "old.keras")
        with (
            zipfile.ZipFile(path) as new,
            zipfile.ZipFile(old_path, "w") as old,
        ):
            for item in new.infolist():
                data = new.read(item)
                if item.filename == "config.json":
                    saved = json.loads(data)
                    del saved["config"]["config"]["attention_bias"]
                    data = json.dumps(saved)
                old.writestr(item, data)
        with self.assertWarnsRegex(UserWarning, "no attention_bias"):
            restored = keras.saving.load_model(old_path)
        self.assertIs(restored.config.attention_bias, True)
        self.assertEqual(restored.count_params(), model.count_params())
        source = self.random_ids((2, 6), 40)
        target = self.random_ids((2, 5), 40, seed=1)
        self.assertAllEqual(
            self.call(model, source, target),
            self.call(restored, source, target),
        )

    def test_attention_bias_adds_the_projection_biases(self):
        def attention_biases(model):
            return [
                w.path
                for w in model.weights
                if "attention/" in w.path and w.path.endswith("_bias")
            ]

        paper = build_transformer(tiny_config())
        self.assertEqual(attention_biases(paper), [])
        biased = build_transformer(tiny_config(attention_bias=True))
        # Q, K, V and O in 2 encoder and 2 x 2 decoder attentions.
        self.assertLen(attention_biases(biased), 4 * 6)
        self.assertEqual(
            biased.count_params() - paper.count_params(),
            closed_form_parameter_count(biased.config)
            - closed_form_parameter_count(paper.config),
        )

    def test_compiled_keras_file_loads_after_importing_the_package_alone(self):
        # As training's `model.keras`: its optimizer, schedule, loss and
        # metrics are the package's. They used to be registered only by
        # importing `keras_transformer.training` ("Could not locate class
        # 'FusedAdam'").
        model = build_transformer(tiny_config())
        model.compile(
            optimizer=transformer_optimizer(32, warmup_steps=10),
            loss=LabelSmoothedCrossEntropy(0.1),
            metrics=[MaskedTokenAccuracy()],
        )
        model.optimizer.build(model.trainable_variables)
        path = os.path.join(self.get_temp_dir(), "compiled.keras")
        model.save(path)
        script = (
            "import keras, keras_transformer, sys; "
            "m = keras.saving.load_model(sys.argv[1]); "
            "print(type(m.optimizer).__name__, type(m.loss).__name__, "
            "m.optimizer.get_config()['learning_rate']['class_name'])"
        )
        result = subprocess.run(
            [sys.executable, "-c", script, path],
            capture_output=True,
            text=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
            check=False,
        )
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertEqual(
            result.stdout.split(),
            ["FusedAdam", "LabelSmoothedCrossEntropy", "TransformerSchedule"],
        )

    def test_dtype_policy_applies_to_the_model_and_all_its_layers(self):
        # The options that add layers: learned positions, the final norm of
        # pre-norm stacks, an output projection.
        config = tiny_config(
            positional="learned",
            norm_position="pre",
            share_embeddings="none",
            source_vocab_size=30,
        )
        model = build_transformer(config, dtype="mixed_float16")
        self.assertEqual(model.dtype_policy.name, "mixed_float16")
        for layer in model._flatten_layers(include_self=False):
            if not isinstance(layer, keras.layers.InputLayer):  # int32 ids
                self.assertEqual(
                    layer.dtype_policy.name, "mixed_float16", layer.path
                )
        # `compile` reads the model's policy to add loss scaling.
        model.compile(optimizer="adam", loss="mse")
        self.assertIsInstance(
            model.optimizer, keras.optimizers.LossScaleOptimizer
        )

    def test_keras_file_round_trip_keeps_the_dtype_policy(self):
        model = build_transformer(tiny_config(), dtype="mixed_bfloat16")
        source = self.random_ids((2, 6), 40)
        target = self.random_ids((2, 5), 40, seed=1)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        restored = keras.saving.load_model(path)
        self.assertEqual(restored.dtype_policy.name, "mixed_bfloat16")
        self.assertEqual(restored.decoder.dtype_policy.name, "mixed_bfloat16")
        self.assertAllEqual(
            self.call(model, source, target),
            self.call(restored, source, target),
        )

    def test_logged_loss_is_the_mean_of_the_steps_on_a_dataset_of_unknown_length(  # noqa: E501
        self,
    ):
        # Without XLA, the call where the dataset runs out counted a step of
        # loss 0 (the tracker's count did not wait for the loss): 3 batches
        # logged 3/4 of their mean, as `keras_transformer.data`'s pipelines
        # all have unknown length.
        rng = np.random.default_rng(0)
        batches = []
        for batch, source_length, target_length in (
            (3, 6, 5),
            (2, 9, 7),
            (4, 4, 3),
        ):
            source = rng.integers(4, 40, (batch, source_length), "int32")
            target = rng.integers(4, 40, (batch, target_length), "int32")
            batches.append(
                ({"source_ids": source, "target_ids": target}, target)
            )
        ids = tf.TensorSpec([None, None], tf.int32)
        dataset = tf.data.Dataset.from_generator(
            lambda: iter(batches),
            output_signature=({"source_ids": ids, "target_ids": ids}, ids),
        )
        self.assertEqual(
            int(dataset.cardinality()), tf.data.UNKNOWN_CARDINALITY
        )
        model = build_transformer(tiny_config())
        loss = LabelSmoothedCrossEntropy(0.1)
        expected = np.mean([float(loss(y, model(x))) for x, y in batches])
        model.compile(optimizer="adam", loss=loss, jit_compile=False)
        self.assertAllClose(
            model.evaluate(dataset, verbose=0), expected, rtol=1e-5
        )

    def test_get_config_from_config_round_trip(self):
        model = build_transformer(tiny_config(share_embeddings="target"))
        clone = Transformer.from_config(model.get_config())
        self.assertEqual(clone.config, model.config)
        self.assertEqual(clone.count_params(), model.count_params())

    def test_clone_model_of_a_compiled_model_compiles_and_trains(self):
        # The step's settings used to be in the compile config, which
        # clone_model passes to the clone's (a Functional's) `compile`.
        model = build_transformer(tiny_config())
        model.compile(
            optimizer=transformer_optimizer(32, warmup_steps=10),
            loss=LabelSmoothedCrossEntropy(0.1),
            metrics=[MaskedTokenAccuracy()],
            jit_compile=False,
        )
        model.gradient_accumulation_steps = 2  # As compile_for_training's.
        clone = keras.models.clone_model(model)
        self.assertTrue(clone.compiled)
        self.assertIsInstance(clone.loss, LabelSmoothedCrossEntropy)
        self.assertIsNot(clone.optimizer, model.optimizer)
        clone.set_weights(model.get_weights())
        source = self.random_ids((2, 5), 40)
        target = self.random_ids((2, 4), 40)
        inputs = {"source_ids": source, "target_ids": target}
        self.assertAllClose(clone.predict(inputs, verbose=0), model(inputs))
        clone.fit(inputs, target, verbose=0)
        self.assertEqual(int(clone.optimizer.iterations), 1)
        # The settings still travel with the model's own config.
        revived = Transformer.from_config(model.get_config())
        self.assertEqual(revived.gradient_accumulation_steps, 2)

    def test_embedding_sharing_options(self):
        shared = build_transformer(tiny_config())
        self.assertIs(shared.source_embedding, shared.target_embedding)
        target_only = build_transformer(
            tiny_config(share_embeddings="target", source_vocab_size=25)
        )
        self.assertIsNot(
            target_only.source_embedding, target_only.target_embedding
        )
        self.assertEqual(target_only.source_embedding.vocab_size, 25)
        self.assertIsNone(target_only.output_projection)

    @pytest.mark.slow
    def test_parameter_counts_equal_the_closed_form(self):
        variants = [
            tiny_config(),
            tiny_config(attention_bias=True),
            tiny_config(share_embeddings="target", source_vocab_size=30),
            tiny_config(share_embeddings="none", source_vocab_size=30),
            tiny_config(positional="learned", norm_position="pre"),
        ]
        # The first Table 3 row of each set of fields that changes a weight's
        # shape (the D rows change only dropout and label smoothing; rows
        # that change the same fields differ only in values, which enter
        # the closed form the same way), with a small vocabulary (it enters
        # the count only through the embedding term, checked above and
        # below).
        kinds = {}
        for row, fields in config_lib.TABLE3_ROWS.items():
            if set(fields) - {"dropout", "label_smoothing"}:
                kinds.setdefault(frozenset(fields), row)
        self.assertEqual(
            sorted(kinds.values()), ["A1", "B1", "C1", "C4", "C6", "E"]
        )
        variants += [
            TransformerConfig.preset(row, vocab_size=100)
            for row in kinds.values()
        ]
        for config in variants:
            self.assertEqual(
                built_parameter_count(config),
                closed_form_parameter_count(config),
            )

    def test_base_and_big_parameter_counts(self):
        # 37,000 shared tokens, the paper's en-de vocabulary. The paper
        # reports 65M and 213M, rounded and with an unstated vocabulary.
        for name, expected, with_biases in (
            ("base", 63_045_632, 63_082_496),
            ("big", 214_171_648, 214_245_376),
        ):
            config = TransformerConfig.preset(name, vocab_size=37000)
            self.assertEqual(closed_form_parameter_count(config), expected)
            # README: 3N attentions x (2 h d_k + h d_v + d_model) biases.
            biased = config.replace(attention_bias=True)
            self.assertEqual(closed_form_parameter_count(biased), with_biases)
            self.assertEqual(with_biases - expected, 3 * 6 * 4 * config.d_model)
            self.assertEqual(built_parameter_count(config), expected)

    def test_build_rejects_non_config(self):
        with self.assertRaisesRegex(TypeError, "Received: config="):
            build_transformer({"d_model": 4})
