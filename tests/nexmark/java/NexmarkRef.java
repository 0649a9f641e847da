/*
 * NexmarkRef.java — the Java reference for sfs's Nexmark generator
 * (nexmark/gen.c): Beam's per-event seeding and generator code paths with
 * nexmark-flink's timestamp and channel/url formulas, on the real
 * java.util.Random, Math.pow, Math.round and String.trim, so the C port is
 * checked against the JDK rather than against itself.  The choices where the
 * Java sources disagree (listed at the top of nexmark/gen.c) are made the
 * same way here: Beam's seeding, Flink's double inter-event delay, Flink's
 * channel draws after the price, bidder + FIRST_PERSON_ID once, and every
 * url drawn from new Random(channel) (hot channel i: 10000 + i).
 *
 * Not run by `make test` (CI may have no JDK).  Single-file program, JDK 11+:
 *
 * The generator is also the Flink Nexmark source's (bench/flink/nexmark compiles this file:
 * fields() gives an event's columns), so Flink and the C runtime read the same events.
 *
 *   java tests/nexmark/java/NexmarkRef.java golden > /tmp/golden.inc
 *       C source of the golden block in tests/test_nexmark_gen.c
 *   java tests/nexmark/java/NexmarkRef.java gen N DIR [rate [firstEventNumber]]
 *       DIR/{person,auction,bid}.csv as `sfs gen --events N --out DIR
 *       --rate R --first-event K` must write them: compare with cmp(1)
 */
package io.sfs.nexmark;

import java.io.BufferedWriter;
import java.io.File;
import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Random;

public final class NexmarkRef {
  // ---- configuration (Beam's GeneratorConfig, Flink's timestampForEvent) ----

  static final long FIRST_PERSON_ID = 1000, FIRST_AUCTION_ID = 1000, FIRST_CATEGORY_ID = 10;
  static final int PERSON_PROPORTION = 1, AUCTION_PROPORTION = 3, DENOMINATOR = 50;
  static final int NUM_CATEGORIES = 5, PERSON_ID_LEAD = 10, AUCTION_ID_LEAD = 10;
  static final int NUM_ACTIVE_PEOPLE = 1000, NUM_IN_FLIGHT_AUCTIONS = 100;
  static final int HOT_SELLERS_RATIO = 4, HOT_AUCTION_RATIO = 2, HOT_BIDDERS_RATIO = 4;
  static final int HOT_ID_RATIO = 100, HOT_CHANNELS_RATIO = 2, CHANNELS_NUMBER = 10_000;
  static final int AVG_PERSON = 200, AVG_AUCTION = 500, AVG_BID = 100;

  public static final class Config {
    long firstEventId = 0, firstEventNumber = 0, oooGroup = 1;
    long baseTime = 1436918400000L;
    double rate = 1e7;
    int generators = 1;

    public Config() {}

    public Config(double rate, long oooGroup, long firstEventId, long firstEventNumber,
        long baseTime, int generators) {
      this.rate = rate;
      this.oooGroup = oooGroup;
      this.firstEventId = firstEventId;
      this.firstEventNumber = firstEventNumber;
      this.baseTime = baseTime;
      this.generators = generators;
    }

    long timestampForEvent(long eventNumber) {
      double interEventDelayUs = 1000000.0 / rate * generators;
      return baseTime + (long) (eventNumber * interEventDelayUs) / 1000L;
    }

    long nextAdjustedEventNumber(long eventsCountSoFar) {
      long n = oooGroup;
      long eventNumber = firstEventNumber + eventsCountSoFar;
      return (eventNumber / n) * n + (eventNumber * 953) % n;
    }
  }

  // ---- ids ----

  static long lastBase0PersonId(long eventId) {
    long epoch = eventId / DENOMINATOR, offset = eventId % DENOMINATOR;
    if (offset >= PERSON_PROPORTION) offset = PERSON_PROPORTION - 1;
    return epoch * PERSON_PROPORTION + offset;
  }

  static long lastBase0AuctionId(long eventId) {
    long epoch = eventId / DENOMINATOR, offset = eventId % DENOMINATOR;
    if (offset < PERSON_PROPORTION) {
      epoch--;
      offset = AUCTION_PROPORTION - 1;
    } else if (offset >= PERSON_PROPORTION + AUCTION_PROPORTION) {
      offset = AUCTION_PROPORTION - 1;
    } else {
      offset -= PERSON_PROPORTION;
    }
    return epoch * AUCTION_PROPORTION + offset;
  }

  static long nextLong(Random random, long n) {
    if (n < Integer.MAX_VALUE) return random.nextInt((int) n);
    return Math.abs(random.nextLong() % n);
  }

  static long nextBase0PersonId(long eventId, Random random) {
    long numPeople = lastBase0PersonId(eventId) + 1;
    long activePeople = Math.min(numPeople, NUM_ACTIVE_PEOPLE);
    long n = nextLong(random, activePeople + PERSON_ID_LEAD);
    return numPeople - activePeople + n;
  }

  static long nextBase0AuctionId(long eventId, Random random) {
    long minAuction = Math.max(lastBase0AuctionId(eventId) - NUM_IN_FLIGHT_AUCTIONS, 0);
    long maxAuction = lastBase0AuctionId(eventId);
    return minAuction + nextLong(random, maxAuction - minAuction + 1 + AUCTION_ID_LEAD);
  }

  // ---- strings and prices ----

  static String nextString(Random random, int maxLength, char special) {
    int len = 3 + random.nextInt(maxLength - 3);
    StringBuilder sb = new StringBuilder();
    while (len-- > 0) {
      if (random.nextInt(13) == 0) sb.append(special);
      else sb.append((char) ('a' + random.nextInt(26)));
    }
    return sb.toString().trim();
  }

  static String nextExactString(Random random, int length) {
    StringBuilder sb = new StringBuilder();
    int rnd = 0, n = 0;
    while (length-- > 0) {
      if (n == 0) {
        rnd = random.nextInt();
        n = 6;
      }
      sb.append((char) ('a' + rnd % 26));
      rnd /= 26;
      n--;
    }
    return sb.toString();
  }

  static String nextExtra(Random random, int currentSize, int desiredAverageSize) {
    if (currentSize > desiredAverageSize) return "";
    desiredAverageSize -= currentSize;
    int delta = (int) Math.round(desiredAverageSize * 0.2);
    int minSize = desiredAverageSize - delta;
    int desiredSize = minSize + (delta == 0 ? 0 : random.nextInt(2 * delta));
    return nextExactString(random, desiredSize);
  }

  static long nextPrice(Random random) {
    return Math.round(Math.pow(10.0, random.nextDouble() * 6.0) * 100.0);
  }

  // ---- channels and urls ----

  static final String[] HOT_CHANNELS = {"Google", "Facebook", "Baidu", "Apple"};
  static final String[] HOT_URLS = new String[HOT_CHANNELS.length];
  static final String[] CHANNEL_URLS = new String[CHANNELS_NUMBER];

  static String baseUrl(Random random) {
    return "https://www.nexmark.com/" + nextString(random, 5, '_') + '/'
        + nextString(random, 5, '_') + '/' + nextString(random, 5, '_') + '/'
        + "item.htm?query=1";
  }

  static {
    for (int c = 0; c < CHANNELS_NUMBER; c++) {
      Random random = new Random(c);
      String url = baseUrl(random);
      if (random.nextInt(10) > 0) url = url + "&channel_id=" + Math.abs(Integer.reverse(c));
      CHANNEL_URLS[c] = url;
    }
    for (int i = 0; i < HOT_URLS.length; i++) HOT_URLS[i] = baseUrl(new Random(CHANNELS_NUMBER + i));
  }

  // ---- CSV ----

  static String field(String s) {
    if (s.indexOf(',') < 0 && s.indexOf('"') < 0 && s.indexOf('\r') < 0 && s.indexOf('\n') < 0)
      return s;
    return '"' + s.replace("\"", "\"\"") + '"';
  }

  static String join(Object... cols) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < cols.length; i++) {
      if (i > 0) sb.append(',');
      sb.append(cols[i] instanceof String ? field((String) cols[i]) : cols[i].toString());
    }
    return sb.append('\n').toString();
  }

  // ---- events: kind 0 person, 1 auction, 2 bid; returns the CSV line ----

  static int kindOf(long id) {
    long rem = id % DENOMINATOR;
    return rem < PERSON_PROPORTION ? 0 : rem < PERSON_PROPORTION + AUCTION_PROPORTION ? 1 : 2;
  }

  static final String[] US_STATES = "AZ,CA,ID,OR,WA,WY".split(",");
  static final String[] US_CITIES =
      "Phoenix,Los Angeles,San Francisco,Boise,Portland,Bend,Redmond,Seattle,Kent,Cheyenne"
          .split(",");
  static final String[] FIRST_NAMES =
      "Peter,Paul,Luke,John,Saul,Vicky,Kate,Julie,Sarah,Deiter,Walter".split(",");
  static final String[] LAST_NAMES =
      "Shultz,Abrams,Spencer,White,Bartels,Walton,Smith,Jones,Noris".split(",");

  static String event(Config config, long eventsCountSoFar) {
    Object[] f = fields(config, eventsCountSoFar);
    return join(java.util.Arrays.copyOfRange(f, 1, f.length));
  }

  /**
   * Event number @eventsCountSoFar of @config: {kind (0 person, 1 auction, 2 bid), then its
   * columns in the CSV's order} — Long for integers, String for text.
   */
  public static Object[] fields(Config config, long eventsCountSoFar) {
    long adjusted = config.nextAdjustedEventNumber(eventsCountSoFar);
    long eventId = config.firstEventId + adjusted;
    long timestamp = config.timestampForEvent(adjusted);
    Random random = new Random(eventId);

    switch (kindOf(eventId)) {
      case 0: {
        long id = lastBase0PersonId(eventId) + FIRST_PERSON_ID;
        String name = FIRST_NAMES[random.nextInt(FIRST_NAMES.length)] + " "
            + LAST_NAMES[random.nextInt(LAST_NAMES.length)];
        String email = nextString(random, 7, ' ') + "@" + nextString(random, 5, ' ') + ".com";
        StringBuilder cc = new StringBuilder();
        for (int i = 0; i < 4; i++) {
          if (i > 0) cc.append(' ');
          cc.append(String.format("%04d", random.nextInt(10000)));
        }
        String creditCard = cc.toString();
        String city = US_CITIES[random.nextInt(US_CITIES.length)];
        String state = US_STATES[random.nextInt(US_STATES.length)];
        int currentSize = 8 + name.length() + email.length() + creditCard.length()
            + city.length() + state.length();
        String extra = nextExtra(random, currentSize, AVG_PERSON);
        return new Object[] {0, eventId, id, name, email, creditCard, city, state, timestamp, extra};
      }
      case 1: {
        long id = lastBase0AuctionId(eventId) + FIRST_AUCTION_ID;
        long seller;
        if (random.nextInt(HOT_SELLERS_RATIO) > 0)
          seller = (lastBase0PersonId(eventId) / HOT_ID_RATIO) * HOT_ID_RATIO;
        else
          seller = nextBase0PersonId(eventId, random);
        seller += FIRST_PERSON_ID;
        long category = FIRST_CATEGORY_ID + random.nextInt(NUM_CATEGORIES);
        long initialBid = nextPrice(random);
        long numEventsForAuctions =
            ((long) NUM_IN_FLIGHT_AUCTIONS * DENOMINATOR) / AUCTION_PROPORTION;
        long futureAuction = config.timestampForEvent(adjusted + numEventsForAuctions);
        long horizonMs = futureAuction - timestamp;
        long expires = timestamp + 1L + nextLong(random, Math.max(horizonMs * 2, 1L));
        String name = nextString(random, 20, ' ');
        String desc = nextString(random, 100, ' ');
        long reserve = initialBid + nextPrice(random);
        int currentSize = 8 + name.length() + desc.length() + 8 + 8 + 8 + 8 + 8;
        String extra = nextExtra(random, currentSize, AVG_AUCTION);
        return new Object[] {1, eventId, id, name, desc, initialBid, reserve, timestamp, expires,
            seller, category, extra};
      }
      default: {
        long auction;
        if (random.nextInt(HOT_AUCTION_RATIO) > 0)
          auction = (lastBase0AuctionId(eventId) / HOT_ID_RATIO) * HOT_ID_RATIO;
        else
          auction = nextBase0AuctionId(eventId, random);
        auction += FIRST_AUCTION_ID;
        long bidder;
        if (random.nextInt(HOT_BIDDERS_RATIO) > 0)
          bidder = (lastBase0PersonId(eventId) / HOT_ID_RATIO) * HOT_ID_RATIO + 1;
        else
          bidder = nextBase0PersonId(eventId, random);
        bidder += FIRST_PERSON_ID;
        long price = nextPrice(random);
        String channel, url;
        if (random.nextInt(HOT_CHANNELS_RATIO) > 0) {
          int i = random.nextInt(HOT_CHANNELS.length);
          channel = HOT_CHANNELS[i];
          url = HOT_URLS[i];
        } else {
          int c = random.nextInt(CHANNELS_NUMBER);
          channel = "channel-" + c;
          url = CHANNEL_URLS[c];
        }
        String extra = nextExtra(random, 8 + 8 + 8 + 8, AVG_BID);
        return new Object[] {2, eventId, auction, bidder, price, channel, url, timestamp, extra};
      }
    }
  }

  // ---- output ----

  static long fnv1a(long h, String s) {
    for (byte b : s.getBytes(StandardCharsets.ISO_8859_1)) {
      h ^= (b & 0xff);
      h *= 0x100000001b3L;
    }
    return h;
  }

  static final long FNV_OFFSET = 0xcbf29ce484222325L;

  static String cstr(String s) {
    StringBuilder sb = new StringBuilder("\"");
    for (char ch : s.toCharArray()) {
      if (ch == '\\' || ch == '"' || ch == '?') sb.append('\\').append(ch);
      else if (ch == '\n') sb.append("\\n");
      else sb.append(ch);
    }
    return sb.append('"').toString();
  }

  static void golden(PrintStream out) {
    out.println("/* ---- golden values: generated by `java tests/nexmark/java/NexmarkRef.java golden`,");
    out.println(" * do not edit by hand ---- */");
    long[] seeds = {0, 1, 42, -1, 1234567890123L, Long.MIN_VALUE};
    int[] bounds = {1, 2, 10, 13, 16, 26, 10000, 1 << 30, (1 << 30) + 1, Integer.MAX_VALUE};
    out.println();
    out.println("static const int64_t gold_seeds[] = {");
    for (long s : seeds) out.println(s == Long.MIN_VALUE ? "\tINT64_MIN," : "\t" + s + "ll,");
    out.println("};");
    out.println("static const int32_t gold_bounds[] = {");
    for (int b : bounds) out.println("\t" + b + ",");
    out.println("};");
    out.println("/* [seed][bound][i]: nextInt(bound) from a fresh Random(seed) */");
    out.println("static const int32_t gold_next_int_n[" + seeds.length + "][" + bounds.length + "][8] = {");
    for (long s : seeds) {
      out.println("\t{");
      for (int b : bounds) {
        Random r = new Random(s);
        StringBuilder sb = new StringBuilder("\t\t{ ");
        for (int i = 0; i < 8; i++) sb.append(r.nextInt(b)).append(i < 7 ? ", " : " },");
        out.println(sb);
      }
      out.println("\t},");
    }
    out.println("};");
    out.println("/* [seed][i]: nextInt(), nextLong(), doubleToRawLongBits(nextDouble()) */");
    out.println("static const int32_t gold_next_int[" + seeds.length + "][8] = {");
    for (long s : seeds) {
      Random r = new Random(s);
      StringBuilder sb = new StringBuilder("\t{ ");
      for (int i = 0; i < 8; i++) sb.append(r.nextInt()).append(i < 7 ? ", " : " },");
      out.println(sb.toString().replace("-2147483648", "INT32_MIN"));
    }
    out.println("};");
    out.println("static const uint64_t gold_next_long[" + seeds.length + "][8] = {");
    for (long s : seeds) {
      Random r = new Random(s);
      StringBuilder sb = new StringBuilder("\t{ ");
      for (int i = 0; i < 8; i++)
        sb.append(String.format("0x%016xull", r.nextLong())).append(i < 7 ? ", " : " },");
      out.println(sb);
    }
    out.println("};");
    out.println("static const uint64_t gold_next_double[" + seeds.length + "][8] = {");
    for (long s : seeds) {
      Random r = new Random(s);
      StringBuilder sb = new StringBuilder("\t{ ");
      for (int i = 0; i < 8; i++)
        sb.append(String.format("0x%016xull", Double.doubleToRawLongBits(r.nextDouble())))
            .append(i < 7 ? ", " : " },");
      out.println(sb);
    }
    out.println("};");

    Config def = new Config();
    out.println();
    out.println("/* The CSV lines of events 0..49 of the default configuration. */");
    out.println("static const char *const gold_first[50] = {");
    for (int n = 0; n < 50; n++) out.println("\t" + cstr(event(def, n)) + ",");
    out.println("};");

    long[] picks = {1000, 1001, 1002, 1003, 1004, 123452, 123457, 9999950, 9999951, 9999999};
    out.println();
    out.println("/* Single events of the default configuration, by event number (= id). */");
    out.println("static const struct { uint64_t n; const char *line; } gold_picks[] = {");
    for (long n : picks) out.println("\t{ " + n + ", " + cstr(event(def, n)) + " },");
    out.println("};");

    Object[][] cfgs = {
      {"default", def, 10000L},
      {"rate 1000/s", new Config(1000, 1, 0, 0, 1436918400000L, 1), 10000L},
      {"rate 100/s, ooo 10, id 3, number 100, base 0, 2 generators",
        new Config(100, 10, 3, 100, 0, 2), 10000L},
      {"rate 0.001/s (auction lengths past 2^31 ms), from number 1e6",
        new Config(0.001, 1, 0, 1000000, 1436918400000L, 1), 2000L},
      {"rate 1e7/s from number 5e9", new Config(1e7, 1, 0, 5000000000L, 1436918400000L, 1),
        2000L},
    };
    out.println();
    out.println("/* FNV-1a 64 over the CSV lines (with their \\n) of events 0..count-1. */");
    out.println("static const struct {");
    out.println("\tconst char *what;");
    out.println("\tdouble rate;");
    out.println("\tuint32_t ooo_group, generators;");
    out.println("\tuint64_t first_event_id, first_event_number, count;");
    out.println("\tint64_t base_time_ms;");
    out.println("\tuint64_t fnv;");
    out.println("} gold_hashes[] = {");
    for (Object[] row : cfgs) {
      Config c = (Config) row[1];
      long count = (Long) row[2];
      long h = FNV_OFFSET;
      for (long n = 0; n < count; n++) h = fnv1a(h, event(c, n));
      out.println(String.format("\t{ \"%s\", %s, %d, %d, %dull, %dull, %dull, %dll, 0x%016xull },",
          row[0], Double.toString(c.rate), c.oooGroup, c.generators, c.firstEventId,
          c.firstEventNumber, count, c.baseTime, h));
    }
    out.println("};");
    out.println("/* ---- end of golden values ---- */");
  }

  static void gen(long events, File dir, double rate, long firstEventNumber) throws IOException {
    Config c = new Config(rate, 1, 0, firstEventNumber, 1436918400000L, 1);
    dir.mkdirs();
    String[] names = {"person.csv", "auction.csv", "bid.csv"};
    String[] headers = {
      "seq,id,name,emailAddress,creditCard,city,state,dateTime,extra\n",
      "seq,id,itemName,description,initialBid,reserve,dateTime,expires,seller,category,extra\n",
      "seq,auction,bidder,price,channel,url,dateTime,extra\n",
    };
    BufferedWriter[] w = new BufferedWriter[3];
    for (int k = 0; k < 3; k++) {
      w[k] = new BufferedWriter(new FileWriter(new File(dir, names[k]), StandardCharsets.ISO_8859_1), 1 << 20);
      w[k].write(headers[k]);
    }
    for (long n = 0; n < events; n++) {
      long id = c.firstEventId + c.nextAdjustedEventNumber(n);
      w[kindOf(id)].write(event(c, n));
    }
    for (BufferedWriter x : w) x.close();
  }

  public static void main(String[] args) throws IOException {
    if (args.length >= 1 && args[0].equals("golden")) {
      golden(System.out);
    } else if (args.length >= 3 && args[0].equals("gen")) {
      gen(Long.parseLong(args[1]), new File(args[2]),
          args.length > 3 ? Double.parseDouble(args[3]) : 1e7,
          args.length > 4 ? Long.parseLong(args[4]) : 0);
    } else {
      System.err.println("usage: NexmarkRef golden | gen N DIR [rate [firstEventNumber]]");
      System.exit(2);
    }
  }
}
