/* Force-included (-include) by the offload SCons tool into OpenMP compiles and HIP host compiles.
 *
 * A compiler cache in preprocessor mode (ccache, sccache) keys an object by the preprocessed
 * source, in which -D options leave no trace unless the source uses them. These typedefs put the
 * identities the output depends on into that text, and emit nothing into the object:
 * - OFFLOAD_TOOL_SOURCE_ID: the source file's (device, inode). clang names OpenMP offload entries
 *   after it, so a cached object of another clone's file must never be served.
 * - OFFLOAD_TOOL_FATBIN_ID: a hash of the HIP fat binary that the host compile embeds
 *   (-fcuda-include-gpubinary), a file the cache does not read. */
#define OFFLOAD_TOOL_ID_CAT2(a, b) a##b
#define OFFLOAD_TOOL_ID_CAT(a, b) OFFLOAD_TOOL_ID_CAT2(a, b)
#ifdef OFFLOAD_TOOL_SOURCE_ID
typedef int OFFLOAD_TOOL_ID_CAT(offload_tool_source_id_, OFFLOAD_TOOL_SOURCE_ID);
#endif
#ifdef OFFLOAD_TOOL_FATBIN_ID
typedef int OFFLOAD_TOOL_ID_CAT(offload_tool_fatbin_id_, OFFLOAD_TOOL_FATBIN_ID);
#endif
