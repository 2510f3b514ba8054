#include "cli/commands.h"

int main(int argc, char** argv) { return dsd::cli::Main(argc, argv); }
