"""The read side: catalog and series, downsampling, distributions; never imports write or
pipeline."""
