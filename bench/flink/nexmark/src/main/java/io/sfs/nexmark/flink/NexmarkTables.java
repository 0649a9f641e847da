package io.sfs.nexmark.flink;

import io.sfs.nexmark.NexmarkRef;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;

import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;

/**
 * The {@code nexmark} table and its views {@code person}, {@code auction}, {@code bid}, as the
 * published Nexmark setup declares them: one stream of all three kinds of event, a nested row
 * per kind, {@code dateTime} its event-time attribute with {@code WATERMARK FOR dateTime AS
 * dateTime - INTERVAL '4' SECOND}.
 *
 * <p>The events are {@code sfs gen}'s: event n is {@link NexmarkRef#fields}(default config, n),
 * the Java reference the C generator is checked against byte for byte, so the C runtime and
 * Flink read the same input. The source is Flink's {@link DataGeneratorSource}: it splits the
 * event numbers [0, events) and checkpoints the next number of each split, so a restored job
 * regenerates exactly the events it had not read. Timestamps are UTC.
 *
 * <p>A fail file (bench/flink/recovery.sh's task failure): when one is named, the generator
 * looks for it every 65,536 events and, finding it, removes it and throws — one failure of the
 * source task, which Flink answers by restarting the job's tasks (the whole job is one
 * pipelined region) on the same TaskManager.
 */
final class NexmarkTables {
    private NexmarkTables() {}

    static final TypeInformation<Row> PERSON = Types.ROW_NAMED(
            new String[] {"id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"},
            Types.LONG, Types.STRING, Types.STRING, Types.STRING, Types.STRING, Types.STRING,
            Types.LOCAL_DATE_TIME, Types.STRING);
    static final TypeInformation<Row> AUCTION = Types.ROW_NAMED(
            new String[] {"id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires",
                "seller", "category", "extra"},
            Types.LONG, Types.STRING, Types.STRING, Types.LONG, Types.LONG, Types.LOCAL_DATE_TIME,
            Types.LOCAL_DATE_TIME, Types.LONG, Types.LONG, Types.STRING);
    static final TypeInformation<Row> BID = Types.ROW_NAMED(
            new String[] {"auction", "bidder", "price", "channel", "url", "dateTime", "extra"},
            Types.LONG, Types.LONG, Types.LONG, Types.STRING, Types.STRING, Types.LOCAL_DATE_TIME, Types.STRING);
    static final TypeInformation<Row> EVENT = Types.ROW_NAMED(
            new String[] {"event_type", "person", "auction", "bid", "dateTime"},
            Types.INT, PERSON, AUCTION, BID, Types.LOCAL_DATE_TIME);

    static LocalDateTime time(Object epochMs) {
        return LocalDateTime.ofInstant(Instant.ofEpochMilli((Long) epochMs), ZoneOffset.UTC);
    }

    /** Event number @n as a row of {@link #EVENT}. */
    static final class Generate implements GeneratorFunction<Long, Row> {
        private static final long serialVersionUID = 1L;
        private transient NexmarkRef.Config config;
        private final String failFile;

        Generate(String failFile) {
            this.failFile = failFile;
        }

        @Override
        public Row map(Long n) throws java.io.IOException {
            if (config == null) {
                config = new NexmarkRef.Config();
            }
            if (failFile != null && (n & 0xFFFF) == 0
                    && java.nio.file.Files.deleteIfExists(java.nio.file.Paths.get(failFile))) {
                throw new java.io.IOException("nexmark: the fail file " + failFile + " asked this task to fail at event " + n);
            }
            Object[] f = NexmarkRef.fields(config, n);
            switch ((Integer) f[0]) {
                case 0: // seq, id, name, email, card, city, state, dateTime, extra
                    return Row.of(0, Row.of(f[2], f[3], f[4], f[5], f[6], f[7], time(f[8]), f[9]), null, null, time(f[8]));
                case 1: // seq, id, item, desc, initialBid, reserve, dateTime, expires, seller, category, extra
                    return Row.of(1, null, Row.of(f[2], f[3], f[4], f[5], f[6], time(f[7]), time(f[8]), f[9], f[10], f[11]),
                            null, time(f[7]));
                default: // seq, auction, bidder, price, channel, url, dateTime, extra
                    return Row.of(2, null, null, Row.of(f[2], f[3], f[4], f[5], f[6], time(f[7]), f[8]), time(f[7]));
            }
        }
    }

    static void register(StreamExecutionEnvironment env, StreamTableEnvironment t, long events, String failFile) {
        DataGeneratorSource<Row> source = new DataGeneratorSource<>(new Generate(failFile), events, EVENT);
        DataStream<Row> s = env.fromSource(source, WatermarkStrategy.noWatermarks(), "nexmark").returns(EVENT);
        t.createTemporaryView("nexmark", t.fromDataStream(s, Schema.newBuilder()
                .column("event_type", "INT")
                .column("person", "ROW<id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING,"
                        + " state STRING, `dateTime` TIMESTAMP(3), extra STRING>")
                .column("auction", "ROW<id BIGINT, itemName STRING, description STRING, initialBid BIGINT,"
                        + " reserve BIGINT, `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT,"
                        + " category BIGINT, extra STRING>")
                .column("bid", "ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,"
                        + " `dateTime` TIMESTAMP(3), extra STRING>")
                .column("dateTime", "TIMESTAMP(3)")
                .watermark("dateTime", "`dateTime` - INTERVAL '4' SECOND")
                .build()));
        t.executeSql("CREATE TEMPORARY VIEW person AS SELECT person.id, person.name, person.emailAddress,"
                + " person.creditCard, person.city, person.state, `dateTime`, person.extra"
                + " FROM nexmark WHERE event_type = 0");
        t.executeSql("CREATE TEMPORARY VIEW auction AS SELECT auction.id, auction.itemName, auction.description,"
                + " auction.initialBid, auction.reserve, `dateTime`, auction.expires, auction.seller,"
                + " auction.category, auction.extra FROM nexmark WHERE event_type = 1");
        t.executeSql("CREATE TEMPORARY VIEW bid AS SELECT bid.auction, bid.bidder, bid.price, bid.channel,"
                + " bid.url, `dateTime`, bid.extra FROM nexmark WHERE event_type = 2");
    }
}
