// Video through the system's ffmpeg, run as a subprocess on the PNG frames.
//
// Why a subprocess and not libavcodec: the encoder is the only part of ffmpeg we need, the
// command line is stable across releases while the libav* APIs are not, and a missing or
// broken ffmpeg must not stop the PNGs, the contact sheet or the plot from being written.
#include <cerrno>
#include <sstream>

#include "core/subprocess.hpp"
#include "render/render_internal.hpp"
#include "shellsim/errors.hpp"

namespace shellsim::detail {

std::optional<std::filesystem::path> encodeVideo(const std::filesystem::path& folder,
                                                 const std::string& pattern, double frameRate,
                                                 const std::filesystem::path& video,
                                                 std::string& why) {
  namespace fs = std::filesystem;
  // ffmpeg picks the container from the extension, so the temporary name keeps ".mp4";
  // the finished file is renamed over `video` like every other output.
  const fs::path temp = video.parent_path() / ("." + video.stem().string() + ".tmp.mp4");
  const fs::path log = video.parent_path() / (video.stem().string() + ".ffmpeg.log");
  std::ostringstream rate;
  rate.precision(17);
  rate << (frameRate > 0 ? frameRate : 30.0);
  const std::string input = (folder / pattern).string();
  std::vector<std::string> args = {
      "ffmpeg", "-nostdin", "-y", "-loglevel", "error", "-framerate", rate.str(), "-i", input,
      // yuv420p (what every player decodes) needs even sides.
      "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf",
      "20", "-movflags", "+faststart", temp.string()};
  const ProcessResult result = runProgram(std::move(args), log);
  if (result.spawnError == ENOENT) {
    why =
        "no video: ffmpeg is not installed (not found on PATH); the PNG frames and the "
        "contact sheet are written (install it with scripts/install-deps.sh)";
    std::error_code ignored;
    fs::remove(log, ignored);
    return std::nullopt;
  }
  if (result.spawnError != 0) {
    throw IoError(video.string() + ": cannot start ffmpeg: " + result.how());
  }
  std::error_code ec;
  if (!result.succeeded()) {
    fs::remove(temp, ec);
    const std::string how = result.how();
    // posix_spawnp reports a missing program as exit 127 on some C libraries.
    if (result.exited && result.code == 127) {
      why =
          "no video: ffmpeg could not be run (exit 127: not found); the PNG frames and the "
          "contact sheet are written";
      return std::nullopt;
    }
    throw IoError(video.string() + ": ffmpeg failed (" + how + "); its messages are in " +
                  log.string());
  }
  fs::rename(temp, video, ec);
  if (ec) throw IoError(video.string() + ": cannot rename " + temp.string() + ": " + ec.message());
  fs::remove(log, ec);
  return video;
}

}  // namespace shellsim::detail
