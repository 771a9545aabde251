import keras
import numpy as np
import tensorflow as tf

from keras_transformer.training import (
    FusedAdam,
    TransformerSchedule,
    transformer_optimizer,
)
from keras_transformer.training.optimizer import StepCountingLossScaleOptimizer
from tests import test_case


def _weights_and_gradients(seed=0):
    rng = np.random.default_rng(seed)
    weights = [
        rng.normal(size=shape).astype("float32") for shape in [(7, 5), (5,)]
    ]
    gradients = [
        [rng.normal(size=w.shape).astype("float32") for w in weights]
        for _ in range(4)
    ]
    return weights, gradients


def _train(
    make_optimizer, weights, gradients, strategy=None, jit_compile=False
):
    """Applies each list of `gradients` in turn; returns the final weights."""
    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():
        optimizer = make_optimizer()
        variables = [keras.Variable(w) for w in weights]
        optimizer.build(variables)

    @tf.function(jit_compile=jit_compile)
    def apply(step_gradients):
        # Every replica applies `gradients / replicas`: the sum is `gradients`.
        def replica_step():
            replicas = tf.distribute.get_replica_context().num_replicas_in_sync
            optimizer.apply([g / replicas for g in step_gradients], variables)

        strategy.run(replica_step)

    for step_gradients in gradients:
        apply([tf.constant(g) for g in step_gradients])
    return [v.numpy() for v in variables]


def _papers_adam(cls, **kwargs):
    return cls(
        learning_rate=TransformerSchedule(8, warmup_steps=2),
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        **kwargs,
    )


class FusedAdamTest(test_case.TestCase):
    def assert_matches_keras_adam(
        self, strategy=None, jit_compile=False, **kwargs
    ):
        weights, gradients = _weights_and_gradients()
        expected = _train(
            lambda: _papers_adam(keras.optimizers.Adam, **kwargs),
            weights,
            gradients,
        )
        fused = _train(
            lambda: _papers_adam(FusedAdam, **kwargs),
            weights,
            gradients,
            strategy,
            jit_compile,
        )
        for before, want, got in zip(weights, expected, fused):
            self.assertGreater(np.abs(want - before).max(), 1e-2)  # It moved.
            self.assertAllClose(got, want, rtol=1e-5, atol=1e-6)

    def test_matches_keras_adam(self):
        self.assert_matches_keras_adam()

    def test_matches_keras_adam_under_xla(self):
        self.assert_matches_keras_adam(jit_compile=True)

    def test_matches_keras_adam_across_mirrored_replicas(self):
        self.assert_matches_keras_adam(
            strategy=test_case.eight_replica_strategy()
        )

    def test_matches_keras_adam_at_its_own_betas_and_epsilon(self):
        # At the paper's settings a fused kernel given another epsilon
        # (1e-9 next to gradients of ~1) would match Keras's all the same.
        weights, gradients = _weights_and_gradients()

        def train(cls, epsilon):
            return _train(
                lambda: cls(
                    learning_rate=0.1, beta_1=0.5, beta_2=0.8, epsilon=epsilon
                ),
                weights,
                gradients,
            )

        expected = train(keras.optimizers.Adam, epsilon=1.0)
        for want, got, paper in zip(
            expected,
            train(FusedAdam, epsilon=1.0),
            train(FusedAdam, epsilon=1e-9),
        ):
            self.assertAllClose(got, want, rtol=1e-5, atol=1e-6)
            self.assertGreater(np.abs(got - paper).max(), 1e-2)

    def test_amsgrad_runs_keras_update(self):
        self.assert_matches_keras_adam(amsgrad=True)

    def test_update_is_one_fused_op_per_variable(self):
        optimizer = _papers_adam(FusedAdam)
        variables = [
            keras.Variable(np.ones((3, 2), "float32")),
            keras.Variable([1.0]),
        ]
        optimizer.build(variables)
        apply = tf.function(lambda g: optimizer.apply(g, variables))
        graph = apply.get_concrete_function(
            [tf.TensorSpec(v.shape, tf.float32) for v in variables]
        ).graph
        op_types = [op.type for op in graph.get_operations()]
        self.assertEqual(op_types.count("ResourceApplyAdam"), 2)
        self.assertNotIn("Sqrt", op_types)  # Keras's own update has two.

    def test_sparse_gradients_run_keras_update(self):
        variable = keras.Variable(np.ones((4, 2), "float32"))
        optimizer = _papers_adam(FusedAdam)
        optimizer.build([variable])
        gradient = tf.IndexedSlices(
            tf.constant([[1.0, 2.0]]), tf.constant([2]), tf.constant([4, 2])
        )
        optimizer.apply([gradient], [variable])
        changed = np.any(variable.numpy() != 1.0, axis=1)
        self.assertAllEqual(changed, [False, False, True, False])

    def test_serialization_round_trip(self):
        optimizer = transformer_optimizer(
            d_model=64, warmup_steps=10, clipnorm=1.0
        )
        revived = keras.optimizers.deserialize(
            keras.optimizers.serialize(optimizer)
        )
        self.assertIsInstance(revived, FusedAdam)
        self.assertEqual(revived.get_config(), optimizer.get_config())

    def test_variables_are_those_of_keras_adam(self):
        # Checkpoints of either optimizer restore into the other.
        variables = [keras.Variable(np.ones((3, 2), "float32"), name="kernel")]
        names = []
        for cls in (keras.optimizers.Adam, FusedAdam):
            optimizer = _papers_adam(cls)
            optimizer.build(variables)
            names.append([v.path.split("/", 1)[1] for v in optimizer.variables])
        self.assertEqual(names[0], names[1])


class TransformerOptimizerTest(test_case.TestCase):
    def test_has_the_papers_adam_settings(self):
        optimizer = transformer_optimizer(d_model=512)
        self.assertIsInstance(optimizer, FusedAdam)
        self.assertAllClose(
            (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon),
            (0.9, 0.98, 1e-9),
        )
        self.assertIsInstance(optimizer._learning_rate, TransformerSchedule)

    def test_further_keras_arguments_reach_the_optimizer(self):
        optimizer = transformer_optimizer(
            d_model=64, warmup_steps=10, clipnorm=0.5, name="paper_adam"
        )
        self.assertEqual(
            (optimizer.clipnorm, optimizer.name), (0.5, "paper_adam")
        )
        revived = keras.optimizers.deserialize(
            keras.optimizers.serialize(optimizer)
        )
        self.assertEqual(revived.clipnorm, 0.5)

    def test_an_epsilon_that_rounds_to_zero_in_the_weights_dtype_is_refused(
        self,
    ):
        # 1e-9 is 0 in float16: Adam would update zero-gradient weights by
        # 0 / 0. In bfloat16 (float32's exponent range) it is not.
        half = keras.Variable(np.ones(3), dtype="float16", name="half")
        with self.assertRaisesRegex(
            ValueError, r"`epsilon` 1e-09 is 0 in float16, .* weight `half`"
        ):
            transformer_optimizer(d_model=8).build([half])
        transformer_optimizer(d_model=8, epsilon=1e-7).build([half])
        brain = keras.Variable(np.ones(3), dtype="bfloat16", name="brain")
        transformer_optimizer(d_model=8).build([brain])


class StepCountingLossScaleOptimizerTest(test_case.TestCase):
    def assert_counts_skipped_steps(self, strategy=None, jit_compile=False):
        weights, gradients = _weights_and_gradients()
        gradients[1][0][0, 0] = np.inf  # The second step overflows.
        strategy = strategy or tf.distribute.get_strategy()
        with strategy.scope():
            optimizer = StepCountingLossScaleOptimizer(
                _papers_adam(FusedAdam), initial_scale=8.0
            )
            variables = [keras.Variable(w) for w in weights]
            optimizer.build(variables)

        @tf.function(jit_compile=jit_compile)
        def apply(step_gradients):
            strategy.run(lambda: optimizer.apply(step_gradients, variables))

        after = []
        for step_gradients in gradients:
            apply([tf.constant(g) for g in step_gradients])
            after.append(
                (
                    [v.numpy() for v in variables],
                    int(optimizer.iterations.numpy()),
                    float(optimizer.dynamic_scale.numpy()),
                )
            )
        # The overflowing step left the weights alone and halved the loss
        # scale, but every step counted.
        for skipped, before in zip(after[1][0], after[0][0]):
            self.assertAllEqual(skipped, before)
        self.assertEqual([scale for *_, scale in after], [8.0, 4.0, 4.0, 4.0])
        self.assertEqual([step for _, step, _ in after], [1, 2, 3, 4])
        self.assertGreater(np.abs(after[3][0][0] - after[1][0][0]).max(), 1e-3)

    def test_counts_skipped_steps(self):
        self.assert_counts_skipped_steps()

    def test_counts_skipped_steps_under_xla(self):
        self.assert_counts_skipped_steps(jit_compile=True)

    def test_counts_skipped_steps_across_mirrored_replicas(self):
        self.assert_counts_skipped_steps(
            strategy=test_case.eight_replica_strategy()
        )

    def test_serialization_round_trip(self):
        optimizer = StepCountingLossScaleOptimizer(
            transformer_optimizer(64, 10)
        )
        revived = keras.optimizers.deserialize(
            keras.optimizers.serialize(optimizer)
        )
        self.assertIsInstance(revived, StepCountingLossScaleOptimizer)
        self.assertIsInstance(revived.inner_optimizer, FusedAdam)
