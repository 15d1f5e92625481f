// Runs three frames of the default scene through the installed library.
#include <filesystem>
#include <iostream>
#include <shellsim/run.hpp>
#include <shellsim/scene.hpp>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  shellsim::RunOptions options;
  options.outputFolder = std::filesystem::path(argv[1]);
  options.maxFrames = 3;
  const shellsim::RunReport report = shellsim::runScene(shellsim::defaultScene(), options);
  std::cout << "consumer wrote " << report.framesWritten << " frames\n";
  return report.framesWritten == 3 ? 0 : 1;
}
