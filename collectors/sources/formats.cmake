# The sources' error formats (collectors/source_formats.h), compiled in as text: each table of
# collectors/sources/ becomes one string of formats_data.cc.in. Included by collectors/ and by the
# fuzz build (tests/fuzz/), which compiles the log pipeline from its sources.
set(DSD_FORMAT_TABLES
    NCCL_FORMATS=nccl_warn_formats TORCH_FORMATS=torch_c10d_formats DEEPSPEED_FORMATS=deepspeed_formats
    CUDA_ERRORS=cuda_errors SLURM_FORMATS=slurm_formats OPENMPI_HELP=openmpi_help PRRTE_HELP=prrte_help
    JAX_FORMATS=jax_distributed_formats KUBERNETES_FORMATS=kubernetes_formats)

# Writes `out` (a .cc defining the tables) from the tables in `sources_dir`; cmake reruns when one changes.
function(dsd_format_tables sources_dir out)
  foreach(entry ${DSD_FORMAT_TABLES})
    string(REPLACE "=" ";" parts ${entry})
    list(GET parts 0 var)
    list(GET parts 1 name)
    file(READ ${sources_dir}/${name}.tsv DSD_${var})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${sources_dir}/${name}.tsv)
  endforeach()
  configure_file(${sources_dir}/formats_data.cc.in ${out} @ONLY)
endfunction()
