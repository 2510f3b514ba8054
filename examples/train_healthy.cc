// A healthy data-parallel training run: every rank trains, saves and resumes the same way.
#include "examples/example_main.h"

int main(int argc, char** argv) { return dsd::examples::RunExample(argc, argv, "healthy data-parallel training", {}); }
