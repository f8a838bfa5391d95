"""Small shared utilities used by every stage and using none of them: paths, provenance, atomic io, config parsing, distributed state, lazy exports."""
