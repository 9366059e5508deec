"""From results to an article: notebook execution and export (papermill, nbconvert), sections per
recipe, tables, plots, comparison verdicts and prose in English and Japanese (the JupyterLab explorer
above it is :mod:`iolab.explorer`).

May import: every layer below. Reports read data only: they never need root or fio.
"""
