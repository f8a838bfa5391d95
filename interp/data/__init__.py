"""Offline data, one module per stage: corpora.py (corpora -> documents -> held-out split), tokenizers.py
(trained BPE or local tokenizers behind TextTokenizer), tokens.py (cached token files, TokenData batches);
integrity.py (content hashes of the cache entries, verified on load).

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    # corpora -> documents -> split
    'CORPORA': 'corpora',
    'SPLITS': 'corpora',
    'HASH_BUCKETS': 'corpora',
    'CHUNK_CHARS': 'corpora',
    'TEXT_SUFFIXES': 'corpora',
    'Document': 'corpora',
    'load_documents': 'corpora',
    'read_text_file': 'corpora',
    'strip_gutenberg': 'corpora',
    'chunk_text': 'corpora',
    'documents_hash': 'corpora',
    'is_validation': 'corpora',
    'split_documents': 'corpora',
    'no_validation_advice': 'corpora',
    'load_split': 'corpora',
    'heldout_text': 'corpora',
    'source_label': 'corpora',
    # tokenizers
    'EOS_TOKEN': 'tokenizers',
    'TOKENIZER_FILE': 'tokenizers',
    'TOKENIZER_CONFIG_FILE': 'tokenizers',
    'SMOLLM2_GGUF': 'tokenizers',
    'BPE_TRAINER': 'tokenizers',
    'MAX_BPE_VOCAB': 'tokenizers',
    'TextTokenizer': 'tokenizers',
    'get_tokenizer': 'tokenizers',
    'train_bpe': 'tokenizers',
    # content hashes of cache entries
    'CacheEntryError': 'integrity',
    'verify_content': 'integrity',
    # token files
    'TOKENS_FORMAT': 'tokens',
    'ENCODE_BATCH_DOCS': 'tokens',
    'VALIDATE_SAMPLE': 'tokens',
    'TokenFileError': 'tokens',
    'token_dtype': 'tokens',
    'TokenData': 'tokens',
    'prepare_tokens': 'tokens',
    'write_tokens': 'tokens',
    'load_tokens': 'tokens',
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
