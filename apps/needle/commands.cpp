// The list of subcommands, in --help order.
#include "commands.h"

namespace needle::cli {

namespace {
int g_exit_code = 0;
}

int ExitCode() { return g_exit_code; }
void SetExitCode(int code) { g_exit_code = code; }

void RegisterAll(CLI::App& app) {
  RegisterInspect(app);
  RegisterDequant(app);
  RegisterRequant(app);
  RegisterSynth(app);
  RegisterTokenize(app);
  RegisterDetokenize(app);
  RegisterRun(app);
  RegisterEval(app);
  RegisterVerify(app);
  RegisterBench(app);
}

}  // namespace needle::cli
