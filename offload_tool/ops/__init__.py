"""Operations over the formats, as the LLVM tools perform them: bundle/unbundle/list
(`bundler_api`, with one file handler class per bundle format in `bundler_handlers`),
heterogeneous archive unbundling (`hda`), packaging and extraction (`package`, `extract`),
embedding into host objects (`embed`), `inspect` (`inspector`) and `verify`.  Each is a library
function the CLIs and the SCons tool call directly."""
