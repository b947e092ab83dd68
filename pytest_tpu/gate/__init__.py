"""The regression gate: baselines, statistics, verdicts and calibration.

Entry points: ``GatePlugin`` (registered by the plugin only when a gate option is given), and the
pure cores ``stats`` and ``compare``, which import neither pytest's runtime state nor TensorFlow.
Importing this package stays cheap: modules are imported by name where they are used.
"""
