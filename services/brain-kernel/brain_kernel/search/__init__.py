"""Search: the word index, embeddings, embedders."""
