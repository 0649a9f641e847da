package io.sfs.flink.jni;

import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;

import java.io.EOFException;
import java.io.IOException;
import java.io.UTFDataFormatException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A context's io buffer (see {@link SfsNative}): one direct buffer, with a Flink output view
 * that serializers write straight into and an input view they read straight out of, so that a
 * state operation's bytes are copied once, between this buffer and sfs.
 *
 * <p>Owned by the task thread (the state calls'); never touched by the snapshot thread. The
 * buffer grows by doubling when a write or an answer does not fit, and is registered with the
 * native context again ({@link SfsNative#setIo}) — the only allocation, amortized.
 */
public final class SfsIo {
    private static final boolean NATIVE_LE = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;

    private final long ctx;
    private ByteBuffer buf;

    /** Where the output view writes next. */
    public final Out out = new Out();
    /** The input view over an answer. */
    public final In in = new In();

    public SfsIo(long ctx, int capacity) {
        this.ctx = ctx;
        this.buf = ByteBuffer.allocateDirect(capacity); // big-endian: DataOutput's contract
        SfsNative.setIo(ctx, buf);
    }

    public ByteBuffer buffer() {
        return buf;
    }

    /** Room for {@code need} bytes, keeping the first {@code keep}. */
    public void ensure(int need, int keep) {
        if (need <= buf.capacity()) {
            return;
        }
        int cap = buf.capacity();
        while (cap < need) {
            cap = cap << 1;
            if (cap <= 0) {
                throw new SfsException("sfs-flink: io buffer over 1 GiB");
            }
        }
        ByteBuffer nb = ByteBuffer.allocateDirect(cap);
        for (int i = 0; i < keep; i++) {
            nb.put(i, buf.get(i));
        }
        buf = nb;
        SfsNative.setIo(ctx, buf);
    }

    /** A u32 the native side wrote in its byte order. */
    public int nativeInt(int pos) {
        int v = buf.getInt(pos);
        return NATIVE_LE ? Integer.reverseBytes(v) : v;
    }

    public void putNativeInt(int pos, int v) {
        buf.putInt(pos, NATIVE_LE ? Integer.reverseBytes(v) : v);
    }

    public void put(int pos, byte[] b, int len) {
        ensure(pos + len, pos);
        buf.put(pos, b, 0, len);
    }

    /** Copies {@code len} bytes at {@code pos} out (snapshot and restore paths only). */
    public byte[] copy(int pos, int len) {
        byte[] b = new byte[len];
        buf.get(pos, b, 0, len);
        return b;
    }

    /** Flink's serializers write here, from {@link #at}. */
    public final class Out implements DataOutputView {
        private int pos;

        public Out at(int p) {
            pos = p;
            return this;
        }

        public int position() {
            return pos;
        }

        private void room(int n) {
            if (pos + n > buf.capacity()) {
                ensure(pos + n, pos);
            }
        }

        @Override
        public void write(int b) {
            room(1);
            buf.put(pos++, (byte) b);
        }

        @Override
        public void write(byte[] b) {
            write(b, 0, b.length);
        }

        @Override
        public void write(byte[] b, int off, int len) {
            room(len);
            buf.put(pos, b, off, len);
            pos += len;
        }

        @Override
        public void writeBoolean(boolean v) {
            write(v ? 1 : 0);
        }

        @Override
        public void writeByte(int v) {
            write(v);
        }

        @Override
        public void writeShort(int v) {
            room(2);
            buf.putShort(pos, (short) v);
            pos += 2;
        }

        @Override
        public void writeChar(int v) {
            room(2);
            buf.putChar(pos, (char) v);
            pos += 2;
        }

        @Override
        public void writeInt(int v) {
            room(4);
            buf.putInt(pos, v);
            pos += 4;
        }

        @Override
        public void writeLong(long v) {
            room(8);
            buf.putLong(pos, v);
            pos += 8;
        }

        @Override
        public void writeFloat(float v) {
            writeInt(Float.floatToIntBits(v));
        }

        @Override
        public void writeDouble(double v) {
            writeLong(Double.doubleToLongBits(v));
        }

        @Override
        public void writeBytes(String s) {
            for (int i = 0; i < s.length(); i++) {
                write(s.charAt(i));
            }
        }

        @Override
        public void writeChars(String s) {
            for (int i = 0; i < s.length(); i++) {
                writeChar(s.charAt(i));
            }
        }

        @Override
        public void writeUTF(String s) throws IOException {
            // DataOutput's modified UTF-8
            int n = 0;
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                n += (c >= 0x0001 && c <= 0x007F) ? 1 : c > 0x07FF ? 3 : 2;
            }
            if (n > 65535) {
                throw new UTFDataFormatException("encoded string too long: " + n + " bytes");
            }
            writeShort(n);
            room(n);
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (c >= 0x0001 && c <= 0x007F) {
                    buf.put(pos++, (byte) c);
                } else if (c > 0x07FF) {
                    buf.put(pos++, (byte) (0xE0 | ((c >> 12) & 0x0F)));
                    buf.put(pos++, (byte) (0x80 | ((c >> 6) & 0x3F)));
                    buf.put(pos++, (byte) (0x80 | (c & 0x3F)));
                } else {
                    buf.put(pos++, (byte) (0xC0 | ((c >> 6) & 0x1F)));
                    buf.put(pos++, (byte) (0x80 | (c & 0x3F)));
                }
            }
        }

        @Override
        public void skipBytesToWrite(int n) {
            room(n);
            pos += n;
        }

        @Override
        public void write(DataInputView source, int n) throws IOException {
            room(n);
            for (int i = 0; i < n; i++) {
                buf.put(pos++, source.readByte());
            }
        }
    }

    /** Flink's serializers read here, over [{@link #over}). */
    public final class In implements DataInputView {
        private int pos;
        private int end;

        public In over(int from, int to) {
            pos = from;
            end = to;
            return this;
        }

        public int position() {
            return pos;
        }

        private void need(int n) throws EOFException {
            if (pos + n > end) {
                throw new EOFException("sfs-flink: read past the end of a value");
            }
        }

        @Override
        public void readFully(byte[] b) throws IOException {
            readFully(b, 0, b.length);
        }

        @Override
        public void readFully(byte[] b, int off, int len) throws IOException {
            need(len);
            buf.get(pos, b, off, len);
            pos += len;
        }

        @Override
        public int skipBytes(int n) {
            int k = Math.min(n, end - pos);
            pos += k;
            return k;
        }

        @Override
        public boolean readBoolean() throws IOException {
            return readByte() != 0;
        }

        @Override
        public byte readByte() throws IOException {
            need(1);
            return buf.get(pos++);
        }

        @Override
        public int readUnsignedByte() throws IOException {
            return readByte() & 0xff;
        }

        @Override
        public short readShort() throws IOException {
            need(2);
            short v = buf.getShort(pos);
            pos += 2;
            return v;
        }

        @Override
        public int readUnsignedShort() throws IOException {
            return readShort() & 0xffff;
        }

        @Override
        public char readChar() throws IOException {
            need(2);
            char v = buf.getChar(pos);
            pos += 2;
            return v;
        }

        @Override
        public int readInt() throws IOException {
            need(4);
            int v = buf.getInt(pos);
            pos += 4;
            return v;
        }

        @Override
        public long readLong() throws IOException {
            need(8);
            long v = buf.getLong(pos);
            pos += 8;
            return v;
        }

        @Override
        public float readFloat() throws IOException {
            return Float.intBitsToFloat(readInt());
        }

        @Override
        public double readDouble() throws IOException {
            return Double.longBitsToDouble(readLong());
        }

        @Override
        public String readLine() throws IOException {
            StringBuilder sb = new StringBuilder();
            while (pos < end) {
                char c = (char) (buf.get(pos++) & 0xff);
                if (c == '\n') {
                    break;
                }
                if (c != '\r') {
                    sb.append(c);
                }
            }
            return sb.toString();
        }

        @Override
        public String readUTF() throws IOException {
            int n = readUnsignedShort();
            need(n);
            char[] chars = new char[n];
            int count = 0;
            int stop = pos + n;
            while (pos < stop) {
                int c = buf.get(pos) & 0xff;
                if (c < 0x80) {
                    pos++;
                    chars[count++] = (char) c;
                } else if ((c >> 5) == 0x6) {
                    int c2 = buf.get(pos + 1) & 0xff;
                    pos += 2;
                    chars[count++] = (char) (((c & 0x1F) << 6) | (c2 & 0x3F));
                } else if ((c >> 4) == 0xE) {
                    int c2 = buf.get(pos + 1) & 0xff;
                    int c3 = buf.get(pos + 2) & 0xff;
                    pos += 3;
                    chars[count++] = (char) (((c & 0x0F) << 12) | ((c2 & 0x3F) << 6) | (c3 & 0x3F));
                } else {
                    throw new UTFDataFormatException("malformed input around byte " + pos);
                }
            }
            return new String(chars, 0, count);
        }

        @Override
        public void skipBytesToRead(int n) throws IOException {
            need(n);
            pos += n;
        }

        @Override
        public int read(byte[] b, int off, int len) {
            if (pos >= end) {
                return -1;
            }
            int k = Math.min(len, end - pos);
            buf.get(pos, b, off, k);
            pos += k;
            return k;
        }

        @Override
        public int read(byte[] b) {
            return read(b, 0, b.length);
        }
    }
}
