"""Sedna's lifelong learning workers and knowledge base server.

The roles ll-train, ll-eval and ll-inference are the worker scripts of
Sedna's lifelong learning example (examples/lifelong_learning/cityscapes/
RFNet: train.py, evaluate.py, predict.py) with a trivial estimator: each
builds Sedna's own LifelongLearning, which reads the pod's environment
(HAS_COMPLETED_INITIAL_TRAINING, CLOUD_KB_INDEX, MODEL_URLS, OUTPUT_URL,
KB_SERVER, DATA_PATH_PREFIX, LC_SERVER...) and reports to the LocalController
itself. ll-kb is Sedna's knowledge base server (sedna.service.run_kb).

The dataset is that example's index format, one sample a line:

    real/berlin_01.png real/berlin_01_label.png
    sim/sim_01.png sim/sim_01_label.png

paths relative to the folder of the job's dataset (ORIGINAL_DATASET_URL),
as the example's _load_txt_dataset reads them. Tasks are Sedna's
TaskDefinitionByOrigin's: a sample whose label names the city (parameter
"city", default berlin) is of the first origin of "attribute" (default
"real, sim"), any other of the second; TaskAllocationByOrigin allocates a
sample by the city names Sedna knows in its path. A task of fewer than
MIN_TRAIN_SAMPLE (10) samples is trained as Sedna's "global" model instead.
"""

import os
import json
import time

import numpy as np

from sedna.algorithms.seen_task_learning.task_update_decision.base_task_update_decision import BaseTaskUpdateDecision
from sedna.common.class_factory import ClassFactory, ClassType
from sedna.common.config import BaseConfig, Context
from sedna.common.file_ops import FileOps
from sedna.datasources import BaseDataSource, TxtDataParse


def _sample_name(x):
    """A sample's name: the basename of its (first) path."""
    if not isinstance(x, str):
        x = x[0]
    return os.path.basename(str(x))


class Estimator:
    """Remembers the label of each sample it trained on and predicts it,
    "unknown" for a sample it never saw: its precision on test data is the
    share of that data it has trained on, which grows round by round."""

    def __init__(self, **kwargs):
        self.labels = {}

    def train(self, train_data=None, valid_data=None, **kwargs):
        for x, y in zip(train_data.x, train_data.y):
            self.labels[_sample_name(x)] = str(y)
        return {"samples": len(self.labels)}

    def predict(self, data=None, **kwargs):
        return np.array([self.labels.get(_sample_name(x), "unknown") for x in data])

    def save(self, model_path):
        os.makedirs(os.path.dirname(model_path) or ".", exist_ok=True)
        with open(model_path, "w") as f:
            json.dump(self.labels, f)
        return model_path

    def load(self, model_url=None, **kwargs):
        if model_url and os.path.isfile(model_url):
            with open(model_url) as f:
                text = f.read()
            if not text:
                # Seen once, under load, on a fresh machine: Sedna's
                # download of a task's model from its knowledge base server
                # left an empty file. The estimator knows nothing then; the
                # log says so, and the cycle goes on as Nereid drives it.
                print(f"model {model_url} is empty: the estimator starts with no labels", flush=True)
                return
            self.labels = json.loads(text)


def _origins():
    """The example's task definition parameters, from the template's env."""
    return Context.get_parameters("attribute", "real, sim"), Context.get_parameters("city", "berlin")


@ClassFactory.register(ClassType.KM)
class UpdateByOrigin(BaseTaskUpdateDecision):
    """The task update decision of TaskDefinitionByOrigin's tasks: each
    task of the knowledge base is trained further on the new samples of its
    origin.

    LifelongLearning.update needs one: its default, "UpdateStrategyDefault",
    is registered nowhere in Sedna's library, and Sedna's
    UpdateStrategyByFinetune, which does this, indexes a list by a list
    (TypeError). A Sedna user's worker registers its own, as this does.
    """

    def __init__(self, task_index, **kwargs):
        super().__init__(task_index)
        attribute, self.city = _origins()
        self.attribute = attribute.split(", ")

    def __call__(self, samples, task_type):
        tasks = [group.tasks[0] for group in self.task_index[task_type][self.task_group_key]]
        strategies = {}
        if not tasks or samples.x is None:
            return tasks, strategies
        every = range(samples.num_examples())
        first = [i for i in every if self.city in str(samples.y[i])]
        part = {self.attribute[0]: first, self.attribute[-1]: sorted(set(every) - set(first))}
        for task in tasks:
            idx = part.get(task.meta_attr, [])
            task.samples = BaseDataSource(data_type=samples.data_type)
            task.samples.x, task.samples.y = samples.x[idx], samples.y[idx]
            strategies[task.entry] = {"raw_data_update": task.samples, "target_model_update": True,
                                      "task_attr_update": None}
        return tasks, strategies


def _load_txt_dataset(line):
    """The example's: a line's paths, joined to the dataset's folder; the
    last is the label."""
    folder = os.path.dirname(Context.get_parameters("original_dataset_url", ""))
    urls = [os.path.join(folder, u) for u in line.split()]
    return urls[:-1], urls[-1]


def _dataset(data_type, url):
    data = TxtDataParse(data_type=data_type, func=_load_txt_dataset)
    data.parse(url, use_raw=False)
    return data


def _unseen_task_processing():
    """predict.py's unseen estimator."""
    return "Warning: unseen sample detected."


def _lifelong_learning():
    """The example's LifelongLearning, on Sedna's base backend.

    Sedna's backend for TensorFlow, its default (BACKEND_TYPE unset), cannot
    run lifelong learning: LifelongLearning.train calls the unseen task
    estimator's train() with no data, which TFBackend.train requires. So the
    role names a backend set_backend maps to no framework (PYTORCH: it knows
    TORCH), which gives the estimator Sedna's base backend, as Sedna's
    PyTorch lifelong learning examples run without torch's.
    """
    os.environ["BACKEND_TYPE"] = "PYTORCH"
    from sedna.core.lifelong_learning import LifelongLearning

    attribute, city = _origins()
    return LifelongLearning(
        Estimator,
        unseen_estimator=_unseen_task_processing,
        task_definition={"method": "TaskDefinitionByOrigin", "param": {"attribute": attribute, "city": city}},
        task_allocation={"method": "TaskAllocationByOrigin"},
        task_update_decision={"method": "UpdateByOrigin"},
    )


def ll_train():
    """train.py: the initial training, or LifelongLearning.update of the
    knowledge base at CLOUD_KB_INDEX when HAS_COMPLETED_INITIAL_TRAINING is
    true (LifelongLearning.train decides)."""
    res = _lifelong_learning().train(_dataset("train", BaseConfig.train_dataset_url))
    print(f"trained: {res}", flush=True)


def ll_eval():
    """evaluate.py, with atcii's eval.py's metric (precision_score, micro)."""
    res = _lifelong_learning().evaluate(_dataset("eval", Context.get_parameters("test_dataset_url")),
                                        metrics="precision_score", metrics_param={"average": "micro"})
    print(f"evaluated: {res}", flush=True)


def _save_unseen(sample, save_url):
    """predict.py's unseen_sample_postprocess, for samples that are names."""
    with open(FileOps.join_path(save_url, _sample_name(sample) + ".unseen"), "w") as f:
        f.write(str(sample[0]))


def ll_inference():
    """predict.py: infer the samples of infer_samples (comma separated
    names; two by default) again and again with the knowledge base of
    MODEL_URLS, which Sedna's library deploys to the edge folder
    (edge_output_url, /var/lib/sedna/kb by default) first."""
    ll = _lifelong_learning()
    names = Context.get_parameters("infer_samples", "real/berlin_01.png,sim/sim_01.png").split(",")
    while True:
        for name in names:
            data = BaseDataSource(data_type="test")
            data.x = [[name]]
            res, is_unseen, _ = ll.inference(data, unseen_sample_postprocess=_save_unseen)
            # A seen sample's result is the array of its predictions, an
            # unseen one's what the unseen estimator returned.
            shown = list(res) if isinstance(res, np.ndarray) else res
            print(f"inference of {name}: {shown} unseen={is_unseen}", flush=True)
        time.sleep(1)


def ll_kb():
    """Sedna's knowledge base server: KnowledgeBaseServer
    (http://<address>:<port>, else 0.0.0.0:9020), KnowledgeBasePath (its
    files' folder) and KB_URL (its database, sqlite in the working folder by
    default)."""
    from sedna.service import run_kb

    run_kb.main()
