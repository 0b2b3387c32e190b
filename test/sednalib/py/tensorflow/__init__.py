"""The little of TensorFlow that Sedna's TFBackend and KerasBackend touch.

The harness's workers train trivial estimators (nereid_workers.py), not
TensorFlow models, but Sedna's backends import tensorflow and open a graph and
a session when they are made; this stands in for that, and nothing more.
"""


class ConfigProto:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class Session:
    def __init__(self, config=None):
        self.config = config


class Graph:
    def as_default(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def reset_default_graph():
    pass


class _V1:
    ConfigProto = ConfigProto
    Session = Session
    reset_default_graph = staticmethod(reset_default_graph)


class compat:
    v1 = _V1
