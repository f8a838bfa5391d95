"""Offline data, one module per stage: documents.py (documents, their ids and the hash split; the packaged corpora
and user files), corpora.py (every corpus by name, the built english one included: english/), text.py (a text of
the user's choice), tokenizers.py (trained BPE or local tokenizers behind TextTokenizer), tokens.py (cached token
files, TokenData batches); integrity.py (content hashes of the cache entries, verified on load); evalsets.py and
contamination.py (the evaluation sets, and the 13-gram overlap of training text with them).

Corpora at scale (`interp data`, docs/data.md): config.py (TokenizeConfig, TrainTokenizerConfig), sources.py
(streaming readers and document ids), shards.py (the tokenized folder: shards + manifest, and its reader for
training), pretokenize.py (the parallel, resumable run on datatrove), tokenizer_training.py (BPE on a sample).

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    # documents -> split; corpora by name; a text of the user's choice
    'CORPORA': 'documents',
    'SPLITS': 'documents',
    'HASH_BUCKETS': 'documents',
    'CHUNK_CHARS': 'documents',
    'TEXT_SUFFIXES': 'documents',
    'Document': 'documents',
    'read_documents': 'documents',
    'read_text_file': 'documents',
    'strip_gutenberg': 'documents',
    'chunk_text': 'documents',
    'documents_hash': 'documents',
    'is_validation': 'documents',
    'split_documents': 'documents',
    'no_validation_advice': 'documents',
    'source_label': 'documents',
    'load_documents': 'corpora',
    'load_split': 'corpora',
    'heldout_text': 'corpora',
    'load_text': 'text',
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
    'check_tokens': 'tokens',
    'TokenStream': 'tokens',
    # corpora at scale: options, readers, the tokenized folder, the runs
    'ReadOptions': 'config',
    'TokenizeConfig': 'config',
    'TrainTokenizerConfig': 'config',
    'parse_size': 'config',
    'DOC_IDS': 'sources',
    'Input': 'sources',
    'CorruptInput': 'sources',
    'discover': 'sources',
    'read_input': 'sources',
    'stream_chunks': 'sources',
    'MANIFEST_FILE': 'manifest',
    'MANIFEST_FORMAT': 'manifest',
    'ShardSpec': 'shards',
    'ConcatTokens': 'shards',
    'is_token_dir': 'shards',
    'read_manifest': 'manifest',
    'Manifest': 'manifest',
    'check_splits': 'shards',
    'load_token_dir': 'shards',
    'plan_shards': 'pretokenize',
    'tokenize_corpus': 'pretokenize',
    'TokenizeShards': 'pretokenize',
    'train_tokenizer': 'tokenizer_training',
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
