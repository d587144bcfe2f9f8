"""The one compiled piece: the search index's gram codes (brain_kernel._grams, ADR 0029).

Optional: where no C compiler is found the install goes on without it and
``search_docs`` uses the pure-Python codes, which are the same.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("brain_kernel._grams", ["services/brain-kernel/brain_kernel/_grams.c"], optional=True)])
