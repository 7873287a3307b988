"""The pure shared core: models' helpers, the point store, series ids, ranges, observed ranges,
normalization, sample columns and texts, commits and broadcasts; it imports no sibling side."""
