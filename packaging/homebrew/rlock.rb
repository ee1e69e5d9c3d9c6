# Homebrew formula for rlock. packaging/make-tarball writes a copy with the release
# URL and checksum filled in to dist/recipes/rlock.rb; publish that one in a tap.
class Rlock < Formula
  desc "Distributed flock(1): run a command under a Redis lock"
  homepage "https://github.com/rlock/rlock"
  url "https://github.com/rlock/rlock/releases/download/v0.1.0/rlock-0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license "MIT"

  depends_on "cmake" => :build
  depends_on "pkgconf" => :build
  depends_on "hiredis"
  # rlock uses Linux process control (prctl PR_SET_PDEATHSIG).
  depends_on :linux
  depends_on "openssl@3"

  def install
    system "cmake", "-S", ".", "-B", "build",
                    "-DBUILD_TESTING=OFF",
                    "-DRLOCK_INSTALL_DOCS=OFF",
                    "-DRLOCK_BASH_COMPLETION_DIR=#{bash_completion}",
                    "-DRLOCK_ZSH_COMPLETION_DIR=#{zsh_completion}",
                    "-DRLOCK_FISH_COMPLETION_DIR=#{fish_completion}",
                    *std_cmake_args
    system "cmake", "--build", "build"
    system "cmake", "--install", "build"
  end

  test do
    # The TLS module is found where it was installed: --version names OpenSSL.
    assert_path_exists lib/"rlock/rlock-tls.so"
    assert_match(/rlock #{version}.*OpenSSL/, shell_output("#{bin}/rlock --version"))
    # Nothing listens on port 1: "Redis unavailable" (69), and the command never runs.
    shell_output("#{bin}/rlock -u redis://127.0.0.1:1 --connect-timeout 1 -k t -- touch ran", 69)
    refute_path_exists testpath/"ran"
  end
end
