"""Numbers from numbers: statistics over repetitions (mean, CI, CoV, flags), curves
(knees, position profiles, fairness) and the figures published in the reference articles.

May import: iolab.core. Pure computation over tidy DataFrames: no devices, no fio, no drawing.
"""
