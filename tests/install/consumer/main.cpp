// Runs three frames of the default scene through the installed library, and renders them
// when shellsim::render is installed.
#include <filesystem>
#include <iostream>
#include <shellsim/run.hpp>
#include <shellsim/scene.hpp>
#ifdef CONSUMER_RENDER
#include <shellsim/render.hpp>
#endif

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  shellsim::RunOptions options;
  options.outputFolder = std::filesystem::path(argv[1]);
  options.maxFrames = 3;
  const shellsim::RunReport report = shellsim::runScene(shellsim::defaultScene(), options);
  std::cout << "consumer wrote " << report.framesWritten << " frames\n";
  if (report.framesWritten != 3) return 1;
#ifdef CONSUMER_RENDER
  shellsim::RenderOptions render;
  render.settings.width = 160;
  render.settings.height = 90;
  render.video = false;
  const shellsim::RenderReport rendered = shellsim::renderRun(argv[1], render);
  std::cout << "consumer rendered " << rendered.framesRendered << " frames\n";
  if (rendered.framesRendered != 3) return 1;
#endif
  return 0;
}
