"""Test models and what runs them against a driver.

Where models come from: spec files (:mod:`randomgraph.spec`), the random-graph generator
(:mod:`randomgraph.generator`: valid models from any source of choices,
:mod:`randomgraph.choices`; Hypothesis strategies in :mod:`randomgraph.strategies`) and
VTS's validation mutations (:mod:`randomgraph.mutations`). How they are judged: the
differential check against the reference (:mod:`randomgraph.differential`, with the
accuracy criteria of :mod:`randomgraph.criteria`), metamorphic relations
(:mod:`randomgraph.metamorphic`), test-case reduction (:mod:`randomgraph.minimize`), and
resumable campaigns with coverage and reports (:mod:`randomgraph.campaign`,
:mod:`randomgraph.coverage`, :mod:`randomgraph.report`).
"""
