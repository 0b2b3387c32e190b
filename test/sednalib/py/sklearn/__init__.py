"""The little of scikit-learn that Sedna's SeenTaskLearning.evaluate touches.

Sedna's lifelong learning evaluation imports sklearn.metrics whatever metric
the worker passes, and looks its metric up there by name (the examples pass
"precision_score"). Debian's python3-sklearn pulls in some 300 MB (scipy,
boost headers, OpenBLAS) for that one import; this stands in for it, and
nothing more.
"""
