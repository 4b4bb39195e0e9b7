"""Table format core: manifests, naming, transactions, the commit protocol, fragments."""
