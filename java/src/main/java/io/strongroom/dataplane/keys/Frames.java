package io.strongroom.dataplane.keys;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;

/** The key service's framing: {@code u32 big-endian length ‖ body}; a frame above its limit is refused. */
final class Frames {
    private Frames() {
    }

    static void write(DataOutputStream out, byte[] body) throws IOException {
        out.writeInt(body.length);
        out.write(body);
        out.flush();
    }

    static byte[] read(DataInputStream in, long limit) throws IOException {
        long size = Integer.toUnsignedLong(in.readInt());
        if (size > limit) {
            throw new IOException("frame of " + size + " bytes is larger than the " + limit + " allowed");
        }
        byte[] body = new byte[(int) size];
        in.readFully(body);
        return body;
    }
}
