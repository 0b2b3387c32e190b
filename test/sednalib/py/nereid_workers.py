"""Sedna's own worker classes, run as a Sedna user's worker image runs them.

Each role is what the worker script of Sedna's example does (examples/ of
../shared/sedna-compat), with a trivial estimator in place of the TensorFlow
model: it reads the pod's environment through Sedna's own Context and
BaseConfig, calls Sedna's own FederatedLearning, JointInference,
AggregationServer..., and those post to the LocalController what Sedna's
library posts. The lifelong learning roles (ll-*) are in nereid_ll.py.
Usage: python3 -m nereid_workers <role>.
"""

import json
import os
import sys
import time

import numpy as np


class Estimator:
    """A model of one weight vector: training adds one to it."""

    def __init__(self, **kwargs):
        self.weights = [np.zeros(4)]

    def train(self, train_data=None, valid_data=None, **kwargs):
        self.weights = [w + 1 for w in self.weights]
        return {"loss": float(1.0 / (1 + self.weights[0][0]))}

    def get_weights(self):
        return self.weights

    def set_weights(self, weights):
        self.weights = [np.array(w, dtype=float) for w in weights]

    def save(self, model_path):
        os.makedirs(os.path.dirname(model_path) or ".", exist_ok=True)
        with open(model_path, "w") as f:
            json.dump([w.tolist() for w in self.weights], f)
        return model_path

    def load(self, model_url=None, **kwargs):
        if model_url and os.path.isfile(model_url):
            with open(model_url) as f:
                self.set_weights(json.load(f))

    def load_weights(self, model_path):
        self.load(model_path)

    def predict(self, data=None, **kwargs):
        return [{"score": float(self.weights[0][0]), "input": str(d)} for d in (data or [])]

    def evaluate(self, data=None, model_path=None, **kwargs):
        """Precision grows with training: 0.5 untrained, 0.7 after one."""
        if model_path and os.path.isfile(model_path):
            self.load(model_path)
        w = float(self.weights[0][0])
        return {"precision": min(0.99, 0.5 + 0.2 * w), "recall": 0.8}


class LogisticModel(Estimator):
    """Logistic regression in numpy, in place of the example's TensorFlow
    model: rows of features and a 0/1 label (the Dataset's file, parsed by
    Sedna's TxtDataParse), gradient descent for `epochs` passes a round; its
    weights are what FedAvg averages."""

    def __init__(self, **kwargs):
        self.weights = [np.zeros(2), np.zeros(1)]

    def train(self, train_data=None, valid_data=None, epochs=1, learning_rate=0.5, **kwargs):
        rows = np.asarray(train_data.x, dtype=float)
        x, y = rows[:, :-1], rows[:, -1]
        w, b = self.weights
        if w.shape[0] != x.shape[1]:
            w = np.zeros(x.shape[1])
        for _ in range(int(epochs) * 20):
            p = 1.0 / (1.0 + np.exp(-(x @ w + b[0])))
            g = p - y
            w = w - float(learning_rate) * (x.T @ g) / len(y)
            b = b - float(learning_rate) * np.array([g.mean()])
        self.weights = [w, b]
        p = 1.0 / (1.0 + np.exp(-(x @ w + b[0])))
        loss = float(-np.mean(y * np.log(p + 1e-9) + (1 - y) * np.log(1 - p + 1e-9)))
        accuracy = float(np.mean((p > 0.5) == (y > 0.5)))
        print(f"trained on {len(y)} rows: loss {loss:.4f}, accuracy {accuracy:.3f}", flush=True)
        # A round of a real model takes time: NEREID_ROUND_SECONDS makes it.
        time.sleep(float(os.environ.get("NEREID_ROUND_SECONDS", "0")))
        return {"loss": loss, "accuracy": accuracy}


def fl_aggregator():
    """Sedna's aggregation_worker/aggregate.py."""
    from sedna.common.config import Context
    from sedna.service.server import AggregationServer

    server = AggregationServer(
        aggregation=Context.get_parameters("aggregation_algorithm", "FedAvg"),
        exit_round=int(Context.get_parameters("exit_round", 3)),
        ws_size=20 * 1024 * 1024,
        participants_count=int(Context.get_parameters("participants_count", 1)),
    )
    server.start()


def fl_trainer():
    """Sedna's training_worker/train.py."""
    from sedna.common.config import BaseConfig, Context
    from sedna.core.federated_learning import FederatedLearning
    from sedna.datasources import TxtDataParse

    train_data = TxtDataParse(data_type="train")
    train_data.parse(BaseConfig.train_dataset_url, use_raw=True)
    fl_model = FederatedLearning(
        estimator=Estimator,
        aggregation=Context.get_parameters("aggregation_algorithm", "FedAvg"))
    fl_model.train(train_data=train_data, valid_data=None, epochs=1)


def fl_trainer_logistic():
    """Sedna's training_worker/train.py with LogisticModel on the numeric
    rows of the Dataset's file: Sedna's TxtDataParse parses each line with
    the example's way, a function of the line."""
    from sedna.common.config import BaseConfig, Context
    from sedna.core.federated_learning import FederatedLearning
    from sedna.datasources import TxtDataParse

    train_data = TxtDataParse(data_type="train", func=lambda line: [float(v) for v in line.split(",")])
    train_data.parse(BaseConfig.train_dataset_url, use_raw=True)
    fl_model = FederatedLearning(
        estimator=LogisticModel,
        aggregation=Context.get_parameters("aggregation_algorithm", "FedAvg"))
    fl_model.train(train_data=train_data, valid_data=None,
                   epochs=int(Context.get_parameters("epochs", 1)),
                   learning_rate=float(Context.get_parameters("learning_rate", 0.5)))


class BoxEstimator(Estimator):
    """The little model of Sedna's joint inference example, in miniature: it
    "detects" one box [xmin, ymin, xmax, ymax, score, label] in each input,
    sure of it (0.95) for an even number and unsure (0.2) for an odd one, so
    that Sedna's IBT hard example mining judges the odd inputs hard."""

    def predict(self, data=None, **kwargs):
        value = int(np.asarray(data).ravel()[0])
        score = 0.95 if value % 2 == 0 else 0.2
        return [[0.0, 0.0, 1.0, 1.0, score, 0]]


def ji_edge():
    """Sedna's little_model/little_model.py: infer each input with
    JointInference.inference, which sends the hard examples (IBT) to the
    cloud worker's BigModelService and counts both; LCReporter posts the
    counters every LC_PERIOD."""
    from sedna.common.config import Context
    from sedna.core.joint_inference import JointInference

    ji = JointInference(estimator=BoxEstimator, hard_example_mining={"method": "IBT", "param": {"threshold_img": 0.9}})
    _wait_for_cloud(Context.get_parameters("BIG_MODEL_IP"), int(Context.get_parameters("BIG_MODEL_PORT", "5000")))
    count = int(Context.get_parameters("NEREID_INFERENCES", "5"))
    for i in range(count):
        is_hard, res, _, cloud = ji.inference(np.array([i]))
        print(f"inference {i}: hard example {is_hard}, cloud result {cloud}", flush=True)
    # The reporter posts once a period; wait for the test to stop the pod.
    while True:
        time.sleep(1)


def _wait_for_cloud(host, port, timeout=180):
    """Waits until the cloud worker's server accepts connections, as a
    camera whose stream starts later would: Sedna's edge worker infers at
    once, and its client gives a hard example up after five refused tries
    3 s apart, while the cloud worker's pod may still be starting (slower
    on a busy machine)."""
    import socket
    deadline = time.time() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=2).close()
            return
        except OSError as e:
            if time.time() > deadline:
                print(f"the cloud worker at {host}:{port} did not answer in {timeout} s: {e}", flush=True)
                return
            time.sleep(0.5)


def ji_edge_only():
    """The edge worker without a cloud to send hard examples to (a kwok run
    starts no cloud worker process): each input inferred by the little model
    alone and counted as Sedna's JointInference counts an edge inference;
    LCReporter posts the counters every LC_PERIOD."""
    from sedna.common.config import Context
    from sedna.core.joint_inference import JointInference

    ji = JointInference(estimator=BoxEstimator, hard_example_mining={"method": "IBT", "param": {"threshold_img": 0.9}})
    count = int(Context.get_parameters("NEREID_INFERENCES", "5"))
    for i in range(count):
        ji.estimator.predict(np.array([i]))
        ji.lc_reporter.update_for_edge_inference()
    while True:
        time.sleep(1)


def ji_cloud():
    """Sedna's big_model/big_model.py: serve the big model, which the edge
    worker's hard examples go to; each it infers is logged."""
    from sedna.core.joint_inference import BigModelService

    class BigModel(Estimator):
        def predict(self, data=None, **kwargs):
            print(f"big model inferring {data}", flush=True)
            return super().predict(data, **kwargs)

    BigModelService(estimator=BigModel).start()


def _txt_data(data_type, url):
    """Sedna's example's loading of a round's data (index lines)."""
    from sedna.datasources import TxtDataParse

    data = TxtDataParse(data_type=data_type)
    data.parse(url, use_raw=True)
    return data


def il_train():
    """Sedna's incremental_learning/helmet_detection/training/train.py."""
    from sedna.common.config import BaseConfig
    from sedna.core.incremental_learning import IncrementalLearning

    IncrementalLearning(estimator=Estimator).train(train_data=_txt_data("train", BaseConfig.train_dataset_url))


def il_eval():
    """Sedna's incremental_learning/helmet_detection/training/eval.py."""
    from sedna.common.config import Context
    from sedna.core.incremental_learning import IncrementalLearning

    IncrementalLearning(estimator=Estimator).evaluate(_txt_data("test", Context.get_parameters("test_dataset_url")))


def il_inference():
    """Sedna's inference.py: serve, with hot update when MODEL_HOT_UPDATE is
    true (Sedna's ModelLoadingThread, started by JobBase)."""
    from sedna.core.incremental_learning import IncrementalLearning

    il = IncrementalLearning(estimator=Estimator)
    served = None
    while True:
        il.inference([0])
        w = float(il.estimator.estimator.weights[0][0])
        if w != served:
            print(f"serving a model of weight {w}", flush=True)
            served = w
        time.sleep(0.5)


def _ll(role):
    """A role of nereid_ll (Sedna's lifelong learning), imported when run."""
    def run():
        import nereid_ll

        getattr(nereid_ll, role)()
    return run


ROLES = {
    "il-train": il_train,
    "il-eval": il_eval,
    "il-inference": il_inference,
    "fl-aggregator": fl_aggregator,
    "fl-trainer": fl_trainer,
    "fl-trainer-logistic": fl_trainer_logistic,
    "ji-edge": ji_edge,
    "ji-edge-only": ji_edge_only,
    "ji-cloud": ji_cloud,
    "ll-train": _ll("ll_train"),
    "ll-eval": _ll("ll_eval"),
    "ll-inference": _ll("ll_inference"),
    "ll-kb": _ll("ll_kb"),
}


def main(argv):
    if len(argv) != 2 or argv[1] not in ROLES:
        print(f"usage: {argv[0]} {'|'.join(sorted(ROLES))}", file=sys.stderr)
        return 2
    ROLES[argv[1]]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
