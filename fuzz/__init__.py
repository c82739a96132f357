"""nnfuzz's command line and atheris fuzz targets."""
