"""``--compare-ref=REF``: base and head measured in the same job, rounds interleaved.

Entry point: ``plugin.register`` (called by the plugin only when ``--compare-ref`` is given, or
in a base session started by one). ``rows`` and ``turns`` are plain code with no pytest state.
"""
