"""The ``english`` corpus build: every clean offline English source, chunked, deduplicated and decontaminated.

    build.py        the recipe and its cache (load, manifest, english_documents; docs/corpus.md)
    text_assets.py  the Debian-packaged texts it reads (scripts/text_assets.sh), their readers and licences
    rlazy.py        R's lazy-load format (the Austen novels)
    dedup.py        exact and near-duplicate (MinHash, Jaccard) removal

A folder of its own because it sits above the rest of interp.data: it reads documents (interp.data.documents) and
the evaluation sets (interp.data.contamination), and interp.data.corpora.load_documents("english") reads it.

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    'NAME': 'build',
    'SOURCE_ORDER': 'build',
    'MAX_DOC_CHARS': 'build',
    'source_of': 'build',
    'source_documents': 'build',
    'missing_sources': 'build',
    'cache_key': 'build',
    'settings': 'build',
    'load': 'build',
    'english_documents': 'build',
    'manifest': 'build',
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
