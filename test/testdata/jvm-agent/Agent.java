// An exec agent on the JVM (the tests' own; Debian packages no NATS client
// for Java): it makes HotSpot compile a hot loop, which needs memory that is
// writable and then executable, says so in a file under its own directory
// ($HOME), and stays up.
public class Agent {
    public static void main(String[] args) throws Exception {
        long sum = 0;
        for (int i = 0; i < 50_000_000; i++) {
            sum += i % 7;
        }
        java.nio.file.Files.writeString(java.nio.file.Path.of(System.getenv("HOME"), "alive"),
                "jvm " + System.getProperty("java.version") + " " + sum + "\n");
        Thread.sleep(Long.MAX_VALUE);
    }
}
