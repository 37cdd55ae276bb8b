package io.strongroom.dataplane.sink;

import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;

/**
 * Sends a task's key-service requests on a thread of its own, one at a time and in the order asked, so that the
 * task reads its next chunk while the driver answers for this one (the client is shared: requests never overlap).
 * A request asked {@code now} runs on the caller's thread instead. One per transform, closed with it.
 */
final class KeyAsker implements AutoCloseable {
    private ExecutorService thread;

    /** {@code request}'s answer to come: on the asking thread, or already answered when {@code ahead} is false. */
    <T> Future<T> ask(Callable<T> request, boolean ahead) {
        if (!ahead) {
            FutureTask<T> now = new FutureTask<>(request);
            now.run();
            return now;
        }
        if (thread == null) {
            thread = Executors.newSingleThreadExecutor(run -> {
                Thread asking = new Thread(run, "strongroom-key-asker");
                asking.setDaemon(true);
                return asking;
            });
        }
        return thread.submit(request);
    }

    /** The answer of a request; what it raised, as it raised it. */
    static <T> T await(Future<T> answer) {
        try {
            return answer.get();
        } catch (ExecutionException e) {
            if (e.getCause() instanceof RuntimeException cause) {
                throw cause;
            }
            throw new IllegalStateException("a key-service request failed", e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the key service", e);
        }
    }

    /** The answer if the request finished without an error, else null (never waits). */
    static <T> T ifAnswered(Future<T> answer) {
        answer.cancel(false); // not started yet: it never will
        if (!answer.isDone() || answer.isCancelled()) {
            return null;
        }
        try {
            return answer.get();
        } catch (ExecutionException | InterruptedException e) {
            return null;
        }
    }

    /** Stop the asking thread (a request under way ends when its client is closed). */
    @Override
    public void close() {
        if (thread != null) {
            thread.shutdownNow();
        }
    }
}
