"""TF Serving's warmup requests file (SavedModel warmup), written and read.

TF Serving replays `assets.extra/tf_serving_warmup_requests` (a TFRecord of
`PredictionLog`s) when it loads a model version, before the version serves.
"""

import os

import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

# Where TF Serving looks for them, relative to the version directory.
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")


def write_warmup_requests(path: str, inputs: dict) -> str:
    """Writes one PredictRequest per signature where TF Serving replays them.

    Args:
        path: the SavedModel's version directory.
        inputs: dict of signature name -> dict of input name -> array (a
            value for every input of the signature: TF Serving refuses to
            load a version whose warmup request it cannot run).

    Returns:
        The path of the written file.
    """
    file_path = os.path.join(path, WARMUP_FILE)
    tf.io.gfile.makedirs(os.path.dirname(file_path))
    with tf.io.TFRecordWriter(file_path) as writer:
        for signature, tensors in inputs.items():
            request = predict_pb2.PredictRequest()
            request.model_spec.signature_name = signature
            for name, value in tensors.items():
                request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())
    return file_path


def read_warmup_requests(path: str) -> list:
    """The warmup requests of the SavedModel at `path`, in file order.

    Returns:
        list of (signature name, dict of input name -> numpy array).
    """
    requests = []
    for record in tf.data.TFRecordDataset(os.path.join(path, WARMUP_FILE)):
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        request = log.predict_log.request
        requests.append(
            (
                request.model_spec.signature_name,
                {
                    name: tf.make_ndarray(proto)
                    for name, proto in request.inputs.items()
                },
            )
        )
    return requests
